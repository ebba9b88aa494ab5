"""docs/http.md, run as written: every bash block in order against a live `sessionwire
serve`, and every JSON output shown checked against what the server answered."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path
from typing import Any

from live_http import cli_env, free_port, serve_process

PAGE = Path(__file__).resolve().parents[2] / "docs" / "http.md"
DOC_PORT = "8765"
# Values that differ on every run: the shape is checked, not the value.
VOLATILE = {
    "runId",
    "traceId",
    "exchangeId",
    "createdAt",
    "sessionId",
    "updatedAt",
    "ts",
    "timestamp",
    "startedAt",
    "endedAt",
    "transcriptPath",
    "path",
}


def blocks(text: str) -> list[tuple[str, str]]:
    return [(m[1], m[2]) for m in re.finditer(r"^```(\w*)\n(.*?)^```$", text, re.S | re.M)]


def assert_same(documented: Any, answered: Any, where: str = "$") -> None:
    if isinstance(documented, dict):
        assert isinstance(answered, dict), where
        assert set(documented) == set(answered), f"{where}: {sorted(answered)}"
        for key, value in documented.items():
            if key not in VOLATILE:
                assert_same(value, answered[key], f"{where}.{key}")
            else:
                assert type(value) is type(answered[key]), f"{where}.{key}"
    elif isinstance(documented, list):
        assert isinstance(answered, list), where
        assert len(documented) == len(answered), where
        for index, (doc, got) in enumerate(zip(documented, answered, strict=True)):
            assert_same(doc, got, f"{where}[{index}]")
    else:
        assert documented == answered, f"{where}: documented {documented!r}, got {answered!r}"


def test_every_example_in_http_md_runs_and_answers_as_shown(tmp_path: Path) -> None:
    port = str(free_port())
    found = [(kind, body.replace(DOC_PORT, port)) for kind, body in blocks(PAGE.read_text())]
    variables = found[0][1]
    assert "export SESSIONWIRE_TOKEN" in variables
    env = cli_env()

    def run(script: str) -> str:
        done = subprocess.run(
            ["bash", "-euo", "pipefail", "-c", f"{variables}\n{script}"],
            env=env,
            cwd=tmp_path,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        assert done.returncode == 0, f"{script}\n{done.stderr}"
        return done.stdout

    serve_at = next(i for i, (_, body) in enumerate(found) if "sessionwire serve" in body)
    for kind, body in found[1:serve_at]:
        assert kind == "bash"
        run(body)
    serve_command = found[serve_at][1].strip()
    checked = 0
    with serve_process(
        serve_command, setup=variables, port=int(port), env=env, cwd=str(tmp_path)
    ) as server:
        rest = found[serve_at + 1 :]
        for index, (kind, body) in enumerate(rest):
            if kind != "bash":
                continue
            output = run(body)
            following = rest[index + 1] if index + 1 < len(rest) else None
            if following is not None and following[0] == "json":
                assert_same(json.loads(following[1]), json.loads(output), where=body[:60])
                checked += 1
    assert server.returncode == 0
    assert checked >= 7

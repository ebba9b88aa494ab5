"""`sessionwire serve` through the real command line."""

from __future__ import annotations

import socket
import subprocess
import sys
from pathlib import Path

import httpx
from hang_bounds import HANG_SECONDS
from live_http import cli_env, free_port, serve_process
from sessionwire.adapters.cli.serve import is_loopback
from sessionwire.domain.policy import list_warning


def sessionwire(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "sessionwire.adapters.cli.main", *args],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
        check=False,
    )


def test_serve_without_a_token_exits_2(tmp_path: Path) -> None:
    env = cli_env()
    env.pop("SESSIONWIRE_TOKEN", None)
    result = sessionwire("--store", f"sqlite:///{tmp_path}/s.db", "serve", env=env)
    assert result.returncode == 2
    assert "no token: set $SESSIONWIRE_TOKEN or pass --token-file" in result.stderr


def test_an_empty_token_file_or_a_missing_script_exits_2(tmp_path: Path) -> None:
    empty = tmp_path / "token"
    empty.write_text("\n")
    store = f"sqlite:///{tmp_path}/s.db"
    result = sessionwire("--store", store, "serve", "--token-file", str(empty), env=cli_env())
    assert result.returncode == 2
    assert "is empty" in result.stderr
    no_script = sessionwire(
        "--store",
        store,
        "serve",
        "--script",
        str(tmp_path / "none.yaml"),
        env=cli_env(SESSIONWIRE_TOKEN="t"),
    )
    assert no_script.returncode == 2
    assert "cannot read script" in no_script.stderr


def test_serve_on_a_taken_port_exits_3_and_says_why(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = sessionwire(
            "--store",
            f"sqlite:///{tmp_path}/s.db",
            "serve",
            "--port",
            str(port),
            env=cli_env(SESSIONWIRE_TOKEN="t"),
        )
    assert result.returncode == 3, result.stderr
    assert "address already in use" in result.stderr  # the OS's reason, from uvicorn
    said = result.stderr.strip().splitlines()[-1]
    assert said.startswith(f"sessionwire: cannot listen on http://127.0.0.1:{port}: ")
    assert "choose another with --port" in said


def test_serve_reads_the_token_file_binds_loopback_and_stops_on_ctrl_c(tmp_path: Path) -> None:
    token_file = tmp_path / "token"
    token_file.write_text("from-the-file\n")
    port = free_port()
    store = f"sqlite:///{tmp_path}/s.db"
    command = (
        f"sessionwire --store {store} serve --port {port} --token-file {token_file} "
        "--max-body-bytes 2048"
    )
    env = cli_env(SESSIONWIRE_TOKEN="not-this-one")
    with serve_process(command, port=port, env=env, cwd=str(tmp_path)) as server:
        url = f"http://127.0.0.1:{port}"
        session = {"X-Sessionwire-Session": "main"}
        good = {"Authorization": "Bearer from-the-file", **session}
        listed = httpx.post(
            f"{url}/v1/tools/sessions_list", json={}, headers=good, timeout=HANG_SECONDS
        )
        from_env = httpx.post(
            f"{url}/v1/tools/sessions_list",
            json={},
            headers={"Authorization": "Bearer not-this-one", **session},
            timeout=HANG_SECONDS,
        )
        too_big = httpx.post(
            f"{url}/v1/tools/sessions_list",
            json={"x": "y" * 4096},
            headers=good,
            timeout=HANG_SECONDS,
        )
    assert listed.status_code == 200
    # The default scope (tree) restricts the list, and the list says so (decision 28).
    assert listed.json() == {
        "count": 0,
        "sessions": [],
        "visibility": {"mode": "tree", "restricted": True, "warning": list_warning("tree")},
    }
    assert from_env.status_code == 401
    assert too_big.status_code == 413
    assert server.returncode == 0
    assert server.stderr is not None
    stderr = server.startup_stderr + server.stderr.read()
    assert f"on http://127.0.0.1:{port}" in stderr
    assert "warning" not in stderr


def test_serve_warns_only_when_listening_beyond_loopback() -> None:
    assert is_loopback("127.0.0.1")
    assert is_loopback("::1")
    assert is_loopback("localhost")
    assert not is_loopback("0.0.0.0")
    assert not is_loopback("192.168.1.20")
    assert not is_loopback("gateway.example.com")


def test_serve_exposes_metrics_to_its_operator_token(tmp_path: Path) -> None:
    port = free_port()
    store = f"sqlite:///{tmp_path}/s.db"
    command = f"sessionwire --store {store} serve --port {port}"
    token = "operator-token-for-serve-metrics-0123456789"
    env = cli_env(SESSIONWIRE_TOKEN=token)
    with serve_process(command, port=port, env=env, cwd=str(tmp_path)):
        url = f"http://127.0.0.1:{port}"
        operator = {"Authorization": f"Bearer {token}"}
        httpx.post(
            f"{url}/v1/tools/sessions_list",
            json={},
            headers={**operator, "X-Sessionwire-Session": "main"},
            timeout=HANG_SECONDS,
        )
        metrics = httpx.get(f"{url}/metrics", headers=operator, timeout=HANG_SECONDS)
        anonymous = httpx.get(f"{url}/metrics", timeout=HANG_SECONDS)
    assert metrics.status_code == 200
    assert 'sessionwire_lane_slots{state="free"} 4.0' in metrics.text
    assert (
        'sessionwire_http_requests_total{route="/v1/tools/sessions_list",status="200"} 1.0'
        in metrics.text
    )
    assert anonymous.status_code == 401


def test_serve_answers_with_python_warnings_as_errors(tmp_path: Path) -> None:
    """Issue 24: pydantic's UnsupportedFieldAttributeWarning was printed once `serve`
    answered (the gateway methods' deferred models were built outside FastAPI's silence
    of it). With every warning an error, the schema page and each method answer, and
    nothing is warned."""
    port = free_port()
    store = f"sqlite:///{tmp_path}/s.db"
    token = "operator-token-for-serve-warnings-0123456789"
    env = cli_env(SESSIONWIRE_TOKEN=token, PYTHONWARNINGS="error")
    command = f"sessionwire --store {store} serve --port {port}"
    methods = ["sessions.list", "sessions.resolve", "sessions.patch", "chat.history", "agent.wait"]
    with serve_process(command, port=port, env=env, cwd=str(tmp_path)) as server:
        url = f"http://127.0.0.1:{port}"
        operator = {"Authorization": f"Bearer {token}"}
        document = httpx.get(f"{url}/openapi.json", timeout=HANG_SECONDS)
        page = httpx.get(f"{url}/docs", timeout=HANG_SECONDS)
        answers = [
            httpx.post(
                f"{url}/v1/methods/{name}", json={}, headers=operator, timeout=HANG_SECONDS
            ).status_code
            for name in methods
        ]
    assert document.status_code == 200
    assert page.status_code == 200
    # Each method validated its body (a refusal or a missing required field): no 500.
    assert answers == [200, 400, 422, 422, 422]
    assert server.stderr is not None
    stderr = server.startup_stderr + server.stderr.read()
    assert "Warning" not in stderr
    assert server.returncode == 0

"""`sessionwire serve` refuses guessable tokens beyond loopback and bad tokens files."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from live_http import cli_env


def sessionwire(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "sessionwire.adapters.cli.main", *args],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
        check=False,
    )


def test_a_short_token_is_refused_beyond_loopback(tmp_path: Path) -> None:
    env = cli_env() | {"SESSIONWIRE_TOKEN": "x"}
    result = sessionwire(
        "--store", f"sqlite:///{tmp_path}/s.db", "serve", "--host", "0.0.0.0", env=env
    )
    assert result.returncode == 2
    assert "a token of 1 characters on 0.0.0.0" in result.stderr
    assert result.stdout == ""


def test_a_bad_tokens_file_exits_2_without_quoting_the_token(tmp_path: Path) -> None:
    tokens = tmp_path / "tokens.yaml"
    tokens.write_text("tokens:\n  - token: s3cret-token-value\n    sesion: main\n")
    tokens.chmod(0o600)
    result = sessionwire(
        "--store", f"sqlite:///{tmp_path}/s.db", "serve", "--tokens", str(tokens), env=cli_env()
    )
    assert result.returncode == 2
    assert "tokens.0" in result.stderr
    assert "s3cret" not in result.stderr

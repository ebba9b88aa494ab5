"""Shell completion for the sessionwire command (issue 16, 'the CLI behaves as people
expect'), through the installed entry point as a shell would call it."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest


def sessionwire(*args: str, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "sessionwire.adapters.cli.main", *args],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, **env},
        check=False,
    )


@pytest.mark.parametrize("shell", ["bash", "zsh", "fish"])
def test_completion_prints_a_script_for_the_shell(shell: str) -> None:
    result = sessionwire("completion", shell)
    assert result.returncode == 0, result.stderr
    assert "_SESSIONWIRE_COMPLETE" in result.stdout


def complete(words: str) -> list[str]:
    cword = str(len(words.split()) - (0 if words.endswith(" ") else 1))
    result = sessionwire(COMP_WORDS=words, COMP_CWORD=cword, _SESSIONWIRE_COMPLETE="bash_complete")
    assert result.returncode == 0, result.stderr
    return [line.split(",", 1)[1] for line in result.stdout.splitlines()]


def test_commands_subcommands_and_options_complete() -> None:
    assert {"sessions", "serve"} <= set(complete("sessionwire se"))
    assert complete("sessionwire sessions l") == ["list"]
    assert "--message-limit" in complete("sessionwire sessions list --mes")
    assert set(complete("sessionwire sessions list --kinds ")) >= {"main", "group", "cron"}

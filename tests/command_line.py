"""Running the sessionwire command line from a test, two ways.

``run_in_process`` calls the console script's ``main`` in this interpreter with its own
argv, environment, working directory, stdout and stderr: the same parsing, commands and
exit codes, without starting an interpreter and importing everything again (about a
second of CPU each). ``run_process`` starts the real console entry point
(``python -m sessionwire.adapters.cli.main``), as a user or a script does; each CLI test
file keeps a few of those, so the process path (exit status, streams) stays covered.
"""

from __future__ import annotations

import contextlib
import io
import os
import subprocess
import sys
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

from sessionwire.adapters.cli.main import main


@dataclass(frozen=True)
class Ran:
    """What a command did; the same fields as ``subprocess.CompletedProcess``."""

    returncode: int
    stdout: str
    stderr: str


@contextlib.contextmanager
def _environment(env: Mapping[str, str] | None, cwd: str | Path | None) -> Iterator[None]:
    saved_env = dict(os.environ)
    saved_cwd = os.getcwd()
    try:
        os.environ.update(env or {})
        if cwd is not None:
            os.chdir(cwd)
        yield
    finally:
        os.chdir(saved_cwd)
        os.environ.clear()
        os.environ.update(saved_env)


def run_in_process(
    *args: str, env: Mapping[str, str] | None = None, cwd: str | Path | None = None
) -> Ran:
    """``sessionwire ARGS`` through ``main``; ``env`` adds to (or overrides) os.environ."""
    out, err = io.StringIO(), io.StringIO()
    with (
        _environment(env, cwd),
        contextlib.redirect_stdout(out),
        contextlib.redirect_stderr(err),
    ):
        code = main(list(args))
    return Ran(code, out.getvalue(), err.getvalue())


def run_process(
    *args: str,
    env: Mapping[str, str] | None = None,
    cwd: str | Path | None = None,
    timeout: float = 120,
) -> Ran:
    """``sessionwire ARGS`` as a real process; ``env`` adds to (or overrides) os.environ."""
    done = subprocess.run(
        [sys.executable, "-m", "sessionwire.adapters.cli.main", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**os.environ, **(env or {})},
        cwd=cwd,
        check=False,
    )
    return Ran(done.returncode, done.stdout, done.stderr)

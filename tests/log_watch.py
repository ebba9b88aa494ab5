"""Every log line the suite produces, grepped for every secret the suite used (issue 16:
no secret in any log).

``LogWatch`` sits on the root logger for the whole session (each xdist worker has its
own): every record of the library (``sessionwire.*``, at DEBUG, so lines only ``-v`` would
show are checked too), of structlog (routed to stdlib by the CLI) and of any other library
is kept as its message, fields and traceback. The secrets are collected where they enter
the code: every token digested (the configured ones in clear and every token a client
presents, wrong guesses included, through ``token_digest``) and every API key a runtime
reads. At the end of the session no kept line may contain one.

Servers the e2e tests start with ``live_http.serve_process`` log to their stderr: it joins
the watch when they stop (``note_output``), with the token they were given.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

# Shorter strings would match ordinary words ("t", "secret"); the suite's tokens are longer.
MIN_SECRET_LENGTH = 8
_STANDARD = frozenset(logging.makeLogRecord({}).__dict__) | {"message", "asctime"}


class LogWatch(logging.Handler):
    def __init__(self) -> None:
        super().__init__(level=logging.DEBUG)
        self.lines: list[str] = []
        self.secrets: set[str] = set()
        self._formatter = logging.Formatter()

    def emit(self, record: logging.LogRecord) -> None:
        try:
            fields = {k: v for k, v in record.__dict__.items() if k not in _STANDARD}
            line = f"{record.name} {record.getMessage()} {fields!r}"
            if record.exc_info:
                line += " " + self._formatter.formatException(record.exc_info)
            if record.stack_info:
                line += " " + record.stack_info
        except Exception as error:  # a record that cannot be rendered is noted, not lost
            line = f"{record.name} unrenderable record: {error!r} {record.msg!r}"
        self.lines.append(line)

    def secret(self, value: object) -> None:
        if isinstance(value, str) and len(value.strip()) >= MIN_SECRET_LENGTH:
            self.secrets.add(value.strip())

    def leaks(self) -> list[tuple[str, str]]:
        """(secret, line) for each kept line holding a secret, at most one per secret."""
        found: dict[str, str] = {}
        for line in self.lines:
            for secret in self.secrets:
                if secret not in found and secret in line:
                    found[secret] = line
        return sorted(found.items())


def watching(function: Callable[..., Any], watch: LogWatch, *, result: bool) -> Callable[..., Any]:
    """``function``, noting its first argument (or its result) as a secret."""

    def watched(*args: Any, **kwargs: Any) -> Any:
        if not result and args:
            watch.secret(args[0])
        value = function(*args, **kwargs)
        if result:
            watch.secret(value)
        return value

    return watched


def note_output(text: str, *, secrets: list[str | None]) -> None:
    """A child process's log (a server the e2e tests started) joins the watch, with the
    secrets it was given."""
    if installed is None:
        return
    installed.lines.extend(text.splitlines())
    for secret in secrets:
        installed.secret(secret)


installed: LogWatch | None = None
"""The session's watch, once ``install`` ran (tests/conftest.py)."""


def install() -> LogWatch:
    """Start watching: the handler on the root logger, the library at DEBUG, and the
    places secrets enter wrapped."""
    from sessionwire.adapters.access import tokens
    from sessionwire.adapters.runtimes.openai_compatible import OpenAIRuntime

    global installed
    watch = installed = LogWatch()
    logging.getLogger().addHandler(watch)
    logging.getLogger("sessionwire").setLevel(logging.DEBUG)
    tokens.token_digest = watching(tokens.token_digest, watch, result=False)  # type: ignore[assignment]
    OpenAIRuntime._read_api_key = watching(  # type: ignore[method-assign]
        OpenAIRuntime._read_api_key, watch, result=True
    )
    return watch

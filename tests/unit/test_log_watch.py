"""The suite's log watch (tests/log_watch.py) finds a secret in any kind of log line."""

from __future__ import annotations

import logging

import pytest
import structlog
from log_watch import LogWatch
from sessionwire.application.library_logging import library_logger

SECRET = "a-token-the-tests-used-0123456789"


def test_a_secret_in_a_message_a_field_or_a_traceback_is_found() -> None:
    watch = LogWatch()
    watch.secret(SECRET)
    watch.secret("short")  # too short to grep for: ignored
    logger = logging.getLogger("log-watch-test")
    logger.addHandler(watch)
    logger.propagate = False
    try:
        logger.warning("clean")
        assert watch.leaks() == []
        library_logger("log-watch-test").warning("bound", header=f"Bearer {SECRET}")
        try:
            raise ValueError(SECRET)
        except ValueError:
            logger.exception("failed")
        structlog.wrap_logger(logger, processors=[structlog.processors.KeyValueRenderer()]).error(
            "kv", token=SECRET
        )
    finally:
        logger.removeHandler(watch)
    assert watch.secrets == {SECRET}
    [(secret, line)] = watch.leaks()
    assert secret == SECRET
    assert "bound" in line
    assert sum(SECRET in line for line in watch.lines) == 3


def test_every_token_the_code_digests_is_watched() -> None:
    import log_watch
    from sessionwire.adapters.access.tokens import TokenSet

    assert log_watch.installed is not None
    TokenSet.operator("operator-token-for-the-watch-0123456789").grant_for("a-wrong-guess")
    assert {"operator-token-for-the-watch-0123456789", "a-wrong-guess"} <= (
        log_watch.installed.secrets
    )
    assert log_watch.installed in logging.getLogger().handlers


def test_a_child_process_log_joins_the_watch(monkeypatch: pytest.MonkeyPatch) -> None:
    import log_watch

    watch = LogWatch()
    monkeypatch.setattr(log_watch, "installed", watch)
    log_watch.note_output(f"INFO started\nERROR token={SECRET}\n", secrets=[SECRET, None])
    assert watch.leaks() == [(SECRET, f"ERROR token={SECRET}")]

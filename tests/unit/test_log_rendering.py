"""The CLI's and servers' log handler renders any value (issue 36): the HTTP error log
passed ``stack=[…]`` and the console renderer, which writes ``"\\n" + stack``, failed
with TypeError inside the handler (234 lines of stderr for one request)."""

from __future__ import annotations

import io
import logging
from collections.abc import Iterator

import pytest
from sessionwire.adapters.cli.context import configure_logging
from sessionwire.application.library_logging import library_logger

ODD_VALUES = [["a.py:1 f", "b.py:2 g"], ("t",), {"k": 1}, b"bytes", 3, object(), None, ""]


@pytest.fixture(params=["console", "json"])
def logged(request: pytest.FixtureRequest) -> Iterator[io.StringIO]:
    written = io.StringIO()
    configure_logging(False, request.param)
    root = logging.getLogger()
    handler = next(h for h in root.handlers if getattr(h, "sessionwire_cli", False))
    assert isinstance(handler, logging.StreamHandler)
    handler.setStream(written)
    failures: list[str] = []
    handler.handleError = lambda record: failures.append(record.getMessage())  # type: ignore[method-assign]
    yield written
    root.removeHandler(handler)
    assert failures == []


def test_every_key_renders_whatever_it_holds(logged: io.StringIO) -> None:
    log = library_logger("sessionwire.http")
    for value in ODD_VALUES:
        for key in ("stack", "exception", "frames", "error"):
            log.error("request failed", path="/v1/x", **{key: value})
    assert logged.getvalue().count("/v1/x") == len(ODD_VALUES) * 4
    assert "a.py:1 f" in logged.getvalue()

"""docs/security.md's bounds table says what the code enforces (issue 27 finding 8: it
said 200 connections where ``serve`` allows 2,000)."""

from __future__ import annotations

import re
from pathlib import Path

from sessionwire.adapters.cli.serve import IDLE_TIMEOUT_SECONDS, MAX_CONNECTIONS

PAGE = Path(__file__).resolve().parents[2] / "docs" / "security.md"


def bounds_row(what: str) -> str:
    [row] = [line for line in PAGE.read_text().splitlines() if line.startswith(f"| {what} |")]
    return row


def test_the_connection_bounds_are_the_codes() -> None:
    row = bounds_row("HTTP connections")
    [open_at_once] = re.findall(r"([\d,]+) open at once", row)
    assert int(open_at_once.replace(",", "")) == MAX_CONNECTIONS
    assert f"idle ones closed after {IDLE_TIMEOUT_SECONDS} s" in row
    assert "served at once" not in row

"""The tests' own HTTP calls carry a timeout: httpx's default (5 s) is shorter than a
live server's first answer on a loaded machine (the first build of the OpenAPI
document), and a test then fails for the load, not for what it checks."""

from __future__ import annotations

import ast
from pathlib import Path

TESTS = Path(__file__).resolve().parents[1]
CLIENTS = {"httpx", "httpx2"}
CALLS = {"get", "post", "put", "patch", "delete", "request", "stream", "Client", "AsyncClient"}


def untimed_calls(source: str) -> list[int]:
    """Lines of ``httpx.get(...)``, ``httpx.Client(...)``… with no ``timeout=``; a
    client on an in-process transport (``transport=``) waits on no network."""
    lines = []
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.Call) or not isinstance(node.func, ast.Attribute):
            continue
        target = node.func
        if not (isinstance(target.value, ast.Name) and target.value.id in CLIENTS):
            continue
        given = {keyword.arg for keyword in node.keywords}
        if target.attr in CALLS and not given & {"timeout", "transport"}:
            lines.append(node.lineno)
    return lines


def test_the_scan_finds_a_call_without_a_timeout() -> None:
    source = (
        "httpx.get(url)\n"
        "httpx.get(url, timeout=HANG_SECONDS)\n"
        "httpx.AsyncClient(transport=transport)\n"
        "httpx2.AsyncClient(headers=headers)\n"
    )
    assert untimed_calls(source) == [1, 4]


def test_every_http_call_of_the_tests_has_a_timeout() -> None:
    found = [
        f"{path.relative_to(TESTS)}:{line}"
        for path in sorted(TESTS.rglob("*.py"))
        for line in untimed_calls(path.read_text())
    ]
    assert found == [], "give these timeout=HANG_SECONDS (tests/hang_bounds.py)"

#!/usr/bin/env python
"""How many times the store's layers write out each query (issue 37 item 3, ADR 0044).

A static count, not a benchmark: for each public method of the blocking query ports, how
many of the store's classes write its signature out (``def``) and how many only name it
(``name = awaited(...)`` / ``read_model_query(...)``), and whether ``AsyncStore`` serves
it; then the methods written out and the lines of each layer's class.

    .venv/bin/python benchmarks/diag_store_layers.py [CHECKOUT]

``CHECKOUT`` (default: this repository) may be another checkout's root, to compare
(``git worktree add /tmp/base 2452497`` or ``git archive 2452497 | tar -x -C /tmp/base``).
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

PORTS = {
    "SessionReadModel": "application/ports/session_read_model.py",
    "RunReadModel": "application/ports/run_read_model.py",
    "WorkQueue": "application/ports/work_queue.py",
    "EventLog": "application/ports/event_log.py",
    "ReadModelMaintenance": "application/ports/read_model_maintenance.py",
}
LAYERS = {
    "AsyncStore": "application/ports/async_store.py",
    "OffLoopStore": "adapters/store/off_loop.py",
    "EventSourcedStore": "adapters/store/event_store.py",
    "SqlReadModel": "adapters/store/read_models.py",
}
Method = ast.FunctionDef | ast.AsyncFunctionDef


def _classes(root: Path) -> dict[str, ast.ClassDef]:
    found: dict[str, ast.ClassDef] = {}
    for name, relative in {**PORTS, **LAYERS}.items():
        for node in ast.parse((root / relative).read_text()).body:
            if isinstance(node, ast.ClassDef) and node.name == name:
                found[name] = node
    return found


def _written(node: ast.ClassDef, name: str) -> bool:
    return any(isinstance(n, Method) and n.name == name for n in node.body)


def _named(node: ast.ClassDef, name: str) -> bool:
    return any(
        isinstance(n, ast.Assign) and any(getattr(t, "id", None) == name for t in n.targets)
        for n in node.body
    )


def main() -> None:
    root = Path(sys.argv[1]) if len(sys.argv) > 1 else Path(__file__).resolve().parent.parent
    classes = _classes(root)
    queries = sorted(
        {
            n.name
            for port in PORTS
            for n in classes[port].body
            if isinstance(n, ast.FunctionDef) and not n.name.startswith("_")
        }
    )
    written = sum(_written(c, q) for q in queries for c in classes.values())
    named = sum(_named(c, q) for q in queries for c in classes.values())
    served = sum(
        _written(classes["AsyncStore"], q) or _named(classes["AsyncStore"], q) for q in queries
    )
    print(
        f"{len(queries)} port queries: {written} signatures written out "
        f"({written / len(queries):.1f} a query), {named} one-line names; "
        f"{served} awaitable on AsyncStore"
    )
    for name in LAYERS:
        node = classes[name]
        methods = sum(isinstance(n, Method) for n in node.body)
        lines = (node.end_lineno or node.lineno) - node.lineno + 1
        print(f"{name:18} {methods:3} methods written out, {lines:4} lines")


if __name__ == "__main__":
    main()

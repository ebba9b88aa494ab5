"""The PostgreSQL server the tests use, and whether it can be reached.

A plain module (not conftest) so test files import it by name under any way of running
pytest: pyproject's ``pythonpath`` puts ``tests/`` on the import path.
"""

from __future__ import annotations

import os

POSTGRES_URL = os.environ.get(
    "SESSIONWIRE_TEST_POSTGRES", "postgresql://postgres@127.0.0.1:5432/test"
)


def _postgres_problem() -> str | None:
    try:
        import psycopg

        with psycopg.connect(POSTGRES_URL.split("?")[0], connect_timeout=3):
            return None
    except Exception as error:  # any failure means: no usable server here
        return f"no PostgreSQL server at {POSTGRES_URL}: {error}"


_PG_PROBLEM: list[str | None] = []


def postgres_problem() -> str | None:
    """Why PostgreSQL tests cannot run here, or None; asked once per test process."""
    if not _PG_PROBLEM:
        _PG_PROBLEM.append(_postgres_problem())
    return _PG_PROBLEM[0]

"""A damaged SQLite file, told in one line (issue 36): which file, what SQLite found and
where, and what to do, instead of a traceback (the CLI) or ``internal error:
DatabaseError`` (``serve``).

SQLite reports damage as a plain ``DatabaseError`` ("database disk image is malformed",
"file is not a database"); its subclasses (a locked database, a missing table, a broken
constraint) are other failures and are left alone.
"""

from __future__ import annotations

import sqlite3
from contextlib import closing
from pathlib import Path

# What SQLite says of a file it cannot read as a database.
_DAMAGE_SIGNS = ("malformed", "not a database", "corrupt", "disk image")
WHAT_TO_DO = (
    "nothing was changed; restore the file from a backup or an earlier `audit export`, or salvage "
    "what is left with `sqlite3 FILE .recover`"
)


def store_damage(error: BaseException) -> BaseException | None:
    """The SQLite error that says the file is damaged, if ``error`` is (or was caused by)
    one; wrappers (the event library's own DatabaseError) are looked through."""
    seen: set[int] = set()
    current: BaseException | None = error
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        text = str(current).lower()
        if isinstance(current, sqlite3.DatabaseError) and any(
            sign in text for sign in _DAMAGE_SIGNS
        ):
            return current
        current = current.__cause__ or current.__context__
    return None


def damaged_store_text(location: str, found: object) -> str:
    """The one line: which store, what SQLite found (and where), what to do."""
    return f"the SQLite store {location} is damaged ({found}): {WHAT_TO_DO}"


def sqlite_file_damage(path: Path, *, lines: int = 1) -> str | None:
    """What ``PRAGMA quick_check`` finds wrong with the file (its first ``lines``), or
    None when it finds nothing. Reads every page once, without writing; a file that is
    not a database at all is damage too."""
    try:
        uri = f"file:{path}?mode=ro"
        with closing(sqlite3.connect(uri, uri=True)) as connection:
            found = [row[0] for row in connection.execute(f"PRAGMA quick_check({lines})")]
    except sqlite3.DatabaseError as error:
        if store_damage(error) is None:
            raise
        return str(error)
    return None if found == ["ok"] else " ".join(" ".join(str(line).split()) for line in found)

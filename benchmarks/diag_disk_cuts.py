#!/usr/bin/env python
"""What candidate cuts of a v3 event row would save on disk, measured on copies of a store.

A diagnostic for the "disk ≤ 1.5× raw" target (issue 23). Copies a SQLite store's
``stored_events`` (and the other tables as they are) into fresh files with the same
schema and page size, one row at a time in position order as the writer inserts them,
each copy with some cuts applied to the rows, and prints each file's size. The copy
without cuts reproduces the original file to the byte, so the differences are the cuts'.
The copies are not stores a gateway could read (the cuts change what the code expects):
they measure bytes only.

Cuts: ``id16`` (the stream id as 16 bytes, in the row and its primary-key index),
``code`` (a message's topic as one character), ``compact`` (a ``Session.MessageAppended``
record's ISO time and origin written short, as the ``Msg`` layout does), ``line`` (a
message record holding only its line: no time, no origin).

    .venv/bin/python benchmarks/diag_disk_cuts.py STORE.sqlite [--page-size 4096] \\
        [--cuts none,id16,code,compact,code+compact,id16+code+compact,id16+code+line]

Make STORE with ``diag_disk_sqlite.py --keep DIR`` on ``main`` at ``d60fa6f`` (records
under ``Session.MessageAppended``); for a raw file's size, that script prints it too.
"""

from __future__ import annotations

import argparse
import re
import sqlite3
import sys
import tempfile
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import Any

COLUMNS = (
    "rowid, originator_id, originator_version, topic, state, role, body, provenance, "
    "stream_hash, log_hash, log_seq"
)
_TIME = re.compile(rb',"timestamp":"([^"]+)"')
Row = tuple[Any, ...]


def _compact(state: bytes) -> bytes:
    found = _TIME.search(state)
    if found is not None:
        at = datetime.fromisoformat(found.group(1).decode().replace("Z", "+00:00"))
        micros = int(at.timestamp()) * 1_000_000 + at.microsecond
        state = state[: found.start()] + b',"t":%d' % micros + state[found.end() :]
    return state.replace(b'"origin":{"channel":', b'"o":{"c":').replace(b',"chat_type":', b',"t":')


def _message(row: Row, change: Callable[[Row], Row]) -> Row:
    # A message stored message first has its line's length in ``body`` (whatever its
    # topic has become under an earlier cut).
    return change(row) if row[6] else row


CUTS: dict[str, Callable[[Row], Row]] = {
    "none": lambda r: r,
    "id16": lambda r: (r[0], bytes.fromhex(r[1]), *r[2:]),
    "code": lambda r: _message(r, lambda m: (*m[:3], "m", *m[4:])),
    "compact": lambda r: _message(r, lambda m: (*m[:4], _compact(m[4]), *m[5:])),
    "line": lambda r: _message(r, lambda m: (*m[:4], m[4][: 11 + m[6]] + b"}", *m[5:])),
}


def copy_size(source: sqlite3.Connection, rows: list[Row], target: Path, page: int) -> int:
    schema = [
        str(sql)
        for (sql,) in source.execute(
            "SELECT sql FROM sqlite_master WHERE sql IS NOT NULL AND name NOT LIKE 'sqlite_%'"
        )
    ]
    others = [
        str(name)
        for (name,) in source.execute(
            "SELECT name FROM sqlite_master WHERE type = 'table' AND name != 'stored_events'"
        )
    ]
    with sqlite3.connect(target) as copy:
        copy.execute(f"PRAGMA page_size = {page}")
        for sql in schema:
            copy.execute(sql)
        marks = ", ".join("?" * len(rows[0]))
        for row in rows:  # one at a time, by position, as the writer inserts them
            copy.execute(f"INSERT INTO stored_events ({COLUMNS}) VALUES ({marks})", row)
        for table in others:
            found = source.execute(f"SELECT * FROM {table}").fetchall()
            if found:
                copy.execute(f"DELETE FROM {table}")
                width = ", ".join("?" * len(found[0]))
                copy.executemany(f"INSERT INTO {table} VALUES ({width})", found)
    copy.close()
    return target.stat().st_size


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("store", help="a v3 SQLite store (its writes checkpointed)")
    parser.add_argument("--page-size", type=int, default=4096)
    parser.add_argument(
        "--cuts", default="none,id16,code,compact,code+compact,id16+code+compact,id16+code+line"
    )
    args = parser.parse_args()
    source = sqlite3.connect(args.store)
    rows: list[Row] = source.execute(
        f"SELECT {COLUMNS} FROM stored_events ORDER BY rowid"
    ).fetchall()
    original = Path(args.store).stat().st_size
    print(f"{'original':40s} {original:>10,d}")
    with tempfile.TemporaryDirectory(prefix="diag-cuts-") as tmp:
        for combination in args.cuts.split(","):
            changed = rows
            for cut in combination.split("+"):
                changed = [CUTS[cut](row) for row in changed]
            size = copy_size(source, changed, Path(tmp, f"{combination}.sqlite"), args.page_size)
            print(f"{combination:40s} {size:>10,d}  {size / original:.3f}× the original")
    return 0


if __name__ == "__main__":
    sys.exit(main())

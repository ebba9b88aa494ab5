#!/usr/bin/env python
"""Where a SQLite store's bytes go, per message: the peers' W1, ours against raw sqlite3.

A diagnostic for the "disk ≤ 1.5× raw" target (issue 23), not a benchmark with targets.
Writes the peers' W1 (5,000 messages of ~300 JSON bytes round-robin over 50 sessions, the
harness's own message factory and raw adapter, ``../shared/bench/peer_bench``) once
through ``Gateway.record_message`` and once through raw ``sqlite3``; or with ``--w2`` its
W2's writes (20,000 messages into one session through ``record_many`` in batches of
1,000, as the peers' adapter does, and raw's ``executemany``; then 30 single appends).
Then reads SQLite's
``dbstat`` table: the file, each table and index (pages, payload, unused bytes) and each
``stored_events`` column (``sum(length(col))``), divided by the messages written.

    .venv/bin/python benchmarks/diag_disk_sqlite.py [--messages 5000] [--json OUT]
    .venv/bin/python benchmarks/diag_disk_sqlite.py --w2

Disk is what the load on a shared machine does not change: one run is the figure.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import shutil
import sqlite3
import sys
import tempfile
from pathlib import Path
from typing import Any

from bench_peers import find_harness

SESSIONS = 50
KEY_PREFIX = "agent:main:bench:group:"
W2_KEY = "w2-big"
W2_APPENDS = 30
BATCH = 1_000


def write_ours(
    path: Path, messages: list[tuple[str, dict[str, Any]]], bulk: list[dict[str, Any]]
) -> None:
    from sessionwire import Gateway, GatewayConfig

    async def write() -> None:
        gw = await Gateway.open(config=GatewayConfig(), store=f"sqlite:///{path}")
        try:
            for start in range(0, len(bulk), BATCH):
                batch = [
                    {"role": m["role"], "content": m["content"]}
                    for m in bulk[start : start + BATCH]
                ]
                await gw.record_many(KEY_PREFIX + W2_KEY, batch, channel="bench", chat_type="group")
            for key, message in messages:
                await gw.record_message(
                    KEY_PREFIX + key,
                    role=message["role"],
                    content=message["content"],
                    channel="bench",
                    chat_type="group",
                )
        finally:
            await gw.close()

    asyncio.run(write())


def write_raw(
    path: Path, messages: list[tuple[str, dict[str, Any]]], bulk: list[dict[str, Any]], raw: Any
) -> None:
    adapter = raw()
    adapter.open(str(path))
    if bulk:
        adapter.bulk_append(W2_KEY, bulk)
    for key, message in messages:
        adapter.append(key, message)
    adapter.close()


def breakdown(directory: Path, db: Path, table: str, messages: int) -> dict[str, Any]:
    """Bytes per message of the files, of each b-tree and of each column of ``table``."""
    files = sum(f.stat().st_size for f in directory.iterdir() if f.is_file())
    with sqlite3.connect(db) as connection:
        page = int(connection.execute("PRAGMA page_size").fetchone()[0])
        trees = {
            str(name): {
                "pages": int(pages),
                "per_message": round(size / messages, 1),
                "payload": round(payload / messages, 1),
                "unused": round(unused / messages, 1),
            }
            for name, pages, size, payload, unused in connection.execute(
                "SELECT name, count(*), sum(pgsize), sum(payload), sum(unused) FROM dbstat "
                "GROUP BY name ORDER BY sum(pgsize) DESC"
            )
        }
        names = [str(row[1]) for row in connection.execute(f"PRAGMA table_info({table})")]
        columns = {
            name: round(
                float(
                    connection.execute(f"SELECT total(length({name})) FROM {table}").fetchone()[0]
                )
                / messages,
                1,
            )
            for name in names
        }
        rows = int(connection.execute(f"SELECT count(*) FROM {table}").fetchone()[0])
    return {
        "file_bytes": files,
        "per_message": round(files / messages, 1),
        "page_size": page,
        "rows": rows,
        "trees": trees,
        "columns": columns,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--messages", type=int, help="W1's (5,000) or W2's (20,000)")
    parser.add_argument("--w2", action="store_true", help="W2's writes instead of W1's")
    parser.add_argument("--shared", help="the shared folder holding bench/peer_bench")
    parser.add_argument("--json", help="write the result here too")
    parser.add_argument("--keep", help="copy both files into this directory")
    args = parser.parse_args()
    sys.path.insert(0, str(find_harness(args.shared)))
    from adapters.raw_sqlite import WalFull  # type: ignore[import-not-found]
    from bench import MessageFactory  # type: ignore[import-not-found]

    factory = MessageFactory(seed=1)
    if args.w2:
        count = args.messages or 20_000
        bulk = [factory.make(W2_KEY) for _ in range(count)]
        work = [(W2_KEY, factory.make(W2_KEY)) for _ in range(W2_APPENDS)]
    else:
        count = args.messages or 5_000
        keys = [f"w1-s{j:03d}" for j in range(SESSIONS)]
        bulk = []
        work = [(keys[i % SESSIONS], factory.make(keys[i % SESSIONS])) for i in range(count)]
    written = len(bulk) + len(work)
    result: dict[str, Any] = {"workload": "w2" if args.w2 else "w1", "messages": written}
    with tempfile.TemporaryDirectory(prefix="diag-disk-") as tmp:
        ours, raw = Path(tmp, "ours"), Path(tmp, "raw")
        ours.mkdir()
        raw.mkdir()
        write_ours(ours / "store.sqlite", work, bulk)
        write_raw(raw / "store.sqlite", work, bulk, WalFull)
        result["ours"] = breakdown(ours, ours / "store.sqlite", "stored_events", written)
        result["raw"] = breakdown(raw, raw / "store.sqlite", "messages", written)
        if args.keep:
            Path(args.keep).mkdir(parents=True, exist_ok=True)
            shutil.copy(ours / "store.sqlite", Path(args.keep, "ours.sqlite"))
            shutil.copy(raw / "store.sqlite", Path(args.keep, "raw.sqlite"))
    result["ratio"] = round(result["ours"]["file_bytes"] / result["raw"]["file_bytes"], 3)
    text = json.dumps(result, indent=2)
    print(text)
    if args.json:
        Path(args.json).write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python
"""Where a PostgreSQL append's client CPU goes: the loop thread, the save threads and the
sealer apart (each thread's own CPU clock).

A diagnostic for issue 23's PostgreSQL CPU target (docs/benchmarks.md, "PostgreSQL: the
save's statements"), beside bench_postgres_cpu.py (which sums every thread and the
server): ``SyncGateway.record_message`` round-robin over 10 sessions of a fresh schema,
``--appends`` after 30 warm-up ones, as that benchmark does. Prints CPU per append for
the process, the calling thread (the event loop's), the saves (``PostgresWriter._save``)
and the sealer's passes (``seal_log``), and how many seal batches ran per append: a pass
comes once every ``BackgroundSealer.SAVES_PER_PASS`` saves, or ``MAX_LAG`` after a save
(ADR 0058; before it, at most every 20 ms of wall time, so the slower the appends, the
more passes each one paid for).

    .venv/bin/python benchmarks/diag_append_postgres_threads.py [--appends 500]
        [--url postgresql://postgres@127.0.0.1:5432/test]

For instruction counts (load-independent), run it under
``valgrind --tool=callgrind --separate-threads=yes`` with two ``--appends`` and divide
the difference by theirs.
"""

from __future__ import annotations

import argparse
import json
import threading
import time
import uuid
from collections import defaultdict
from collections.abc import Callable
from typing import Any

import psycopg
from sessionwire import SyncGateway
from sessionwire.adapters.store import postgres, postgres_writer

_spent: defaultdict[str, float] = defaultdict(float)
_timing = threading.Event()


def timed(owner: Any, name: str) -> None:
    """``owner.name`` adds its calls' CPU (its thread's clock) and count to ``_spent``."""
    original: Callable[..., Any] = getattr(owner, name)

    def measured(*args: Any, **kwargs: Any) -> Any:
        if not _timing.is_set():
            return original(*args, **kwargs)
        started = time.thread_time()
        try:
            return original(*args, **kwargs)
        finally:
            _spent[name] += time.thread_time() - started
            _spent[name + " calls"] += 1

    setattr(owner, name, measured)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--appends", type=int, default=500)
    parser.add_argument("--url", default="postgresql://postgres@127.0.0.1:5432/test")
    args = parser.parse_args()
    timed(postgres_writer.PostgresWriter, "_save")
    timed(postgres.PostgresSessionRecorder, "seal_log")
    timed(postgres.PostgresSessionRecorder, "_seal_batch")
    schema = f"diag_{uuid.uuid4().hex[:12]}"
    gateway = SyncGateway.open(store=f"{args.url}?schema={schema}", resume=False)
    try:
        for n in range(30):
            gateway.record_message(f"bench:{n % 10}", role="user", content="warm-up")
        process, caller = time.process_time(), time.thread_time()
        _timing.set()
        for n in range(args.appends):
            gateway.record_message(f"bench:{n % 10}", role="user", content=f"message {n} " * 8)
        _timing.clear()
        caller = time.thread_time() - caller
        process = time.process_time() - process
    finally:
        gateway.close()
        with psycopg.connect(args.url, autocommit=True) as connection:
            connection.execute(f'DROP SCHEMA "{schema}" CASCADE')
    per = 1000 / args.appends
    print(
        json.dumps(
            {
                "process_ms": round(process * per, 3),
                "loop_thread_ms": round(caller * per, 3),
                "save_threads_ms": round(_spent["_save"] * per, 3),
                "sealer_ms": round(_spent["seal_log"] * per, 3),
                "seal_batches_per_append": round(_spent["_seal_batch calls"] / args.appends, 2),
            }
        )
    )


if __name__ == "__main__":
    main()

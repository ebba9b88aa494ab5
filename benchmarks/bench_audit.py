"""Benchmark of ``audit verify`` and ``audit rebuild`` on a large SQLite store. Not a test:
figures for docs/benchmarks.md.

    .venv/bin/python benchmarks/bench_audit.py [--events 1000000] [--per-session 1000]
    .venv/bin/python benchmarks/bench_audit.py --events 100000 --bundles

``--bundles`` times the signed-checkpoint commands instead (ADR 0016): ``audit
checkpoint``, one session's bundle and the whole-store export, and ``audit verify FILE``
on each.

Builds a store of ``--events`` events (sessions of ``--per-session`` messages, written
through the store's own save path in batches, so the chain and read models are the real
ones), then runs the two commands through the real CLI, each in a fresh process, and
reports wall time, events/s and that process's peak RSS (``ru_maxrss`` from wait4).
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import subprocess
import sys
import tempfile
import time
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import structlog
from sessionwire.adapters.store.chain import SqlChain
from sessionwire.adapters.store.event_store import EventSourcedStore
from sessionwire.application.config.gateway_config import GatewayConfig
from sessionwire.domain.session import Session
from sessionwire.domain.transcript import TranscriptMessage

structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING))
BATCH = 500  # messages per save
START = datetime(2026, 1, 1, tzinfo=UTC)


def generate(url: str, events: int, per_session: int) -> dict[str, Any]:
    started = time.perf_counter()
    rules = GatewayConfig().key_rules
    # The CLI's own classifier, so that a rebuild finds the rows it would have written.
    store = EventSourcedStore(url, kind_of=lambda state: rules.kind(state.key, state.chat_type))
    written = 0
    moment = START
    session_number = 0
    while written < events:
        session_number += 1
        key = f"agent:main:bench:{session_number}"
        session = Session.open(key=key, session_id=uuid.uuid4(), agent_id="main", at=moment)
        written += 1
        in_session = 0
        while in_session < per_session and written < events:
            for _ in range(min(BATCH, per_session - in_session, events - written)):
                moment += timedelta(milliseconds=10)
                text = f"message {in_session} of session {session_number}"
                session.append_message(
                    TranscriptMessage(
                        role="user",
                        content=[{"type": "text", "text": text}],
                        timestamp=int(moment.timestamp() * 1000),
                    ),
                    at=moment,
                )
                in_session += 1
                written += 1
            store.save(session)
        if in_session == 0:
            store.save(session)
    store.close()
    return {"events": written, "sessions": session_number, "seconds": time.perf_counter() - started}


def run_child(url: str, *command: str) -> dict[str, Any]:
    # Popen.communicate() reaps the child, which loses its rusage; so start it without
    # waiting and collect it with wait4 ourselves.
    started = time.perf_counter()
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "sessionwire.adapters.cli.main",
                "--store",
                url,
                "--json",
                *command,
            ],
            stdout=out,
            stderr=err,
        )
        _, status, usage = os.wait4(process.pid, 0)
        process.returncode = os.waitstatus_to_exitcode(status)
        seconds = time.perf_counter() - started
        out.seek(0)
        err.seek(0)
        text = out.read().decode()
        return {
            "command": " ".join(command),
            "exit": process.returncode,
            "seconds": round(seconds, 2),
            "peak_rss_mb": round(usage.ru_maxrss / 1024, 1),
            "result": json.loads(text) if text else err.read().decode()[-500:],
        }


def append_cost(workdir: Path, saves: int) -> dict[str, Any]:
    """Per-save time of one-message appends with the chain, and with its writes skipped."""
    timings: dict[str, float] = {}
    original = SqlChain.append
    for variant in ("without_chain", "with_chain", "without_chain_again", "with_chain_again"):
        if variant.startswith("without"):
            SqlChain.append = lambda *_: None  # type: ignore[method-assign]
        else:
            SqlChain.append = original  # type: ignore[method-assign]
        database = workdir / f"append-{variant}.db"
        store = EventSourcedStore(f"sqlite:///{database}", kind_of=lambda state: "direct")
        sessions = [
            Session.open(key=f"agent:main:s{n}", session_id=uuid.uuid4(), agent_id="main", at=START)
            for n in range(100)
        ]
        for session in sessions:
            store.save(session)
        started = time.perf_counter()
        for number in range(saves):
            session = sessions[number % len(sessions)]
            session.append_message(
                TranscriptMessage(
                    role="user", content=[{"type": "text", "text": "hi"}], timestamp=0
                ),
                at=START,
            )
            store.save(session)
        timings[variant] = (time.perf_counter() - started) / saves * 1e6
        store.close()
        database.unlink()
    SqlChain.append = original  # type: ignore[method-assign]
    without = min(timings["without_chain"], timings["without_chain_again"])
    with_chain = min(timings["with_chain"], timings["with_chain_again"])
    return {
        "saves": saves,
        "us_per_save": {name: round(value, 1) for name, value in timings.items()},
        "ratio_with_to_without": round(with_chain / without, 3),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=1_000_000)
    parser.add_argument("--per-session", type=int, default=1_000)
    parser.add_argument("--workdir", type=Path, default=None)
    parser.add_argument("--out", type=Path, default=None)
    parser.add_argument(
        "--append-cost", type=int, default=0, metavar="SAVES", help="only time appends"
    )
    parser.add_argument(
        "--bundles", action="store_true", help="time checkpoint, export and verify FILE"
    )
    args = parser.parse_args()
    workdir = args.workdir or Path(tempfile.mkdtemp(prefix="bench-audit-"))
    if args.append_cost:
        print(json.dumps(append_cost(workdir, args.append_cost), indent=2))
        return 0
    database = workdir / f"audit-{args.events}.db"
    database.unlink(missing_ok=True)
    url = f"sqlite:///{database}"
    built = generate(url, args.events, args.per_session)
    built["events_per_second"] = round(built["events"] / built["seconds"])
    print(f"generated {built['events']} events in {built['seconds']:.1f} s", file=sys.stderr)
    results: dict[str, Any] = {
        "events": built["events"],
        "sessions": built["sessions"],
        "file_mb": round(database.stat().st_size / 2**20, 1),
        "generate": built,
    }
    key = workdir / "bench-checkpoint.key"
    bundle, whole = workdir / "bench-session.jsonl", workdir / "bench-all.jsonl"
    commands = (
        (
            ("checkpoint", ("audit", "checkpoint", "--key", str(key))),
            (
                "export_session",
                (
                    "audit",
                    "export",
                    "--session",
                    "agent:main:bench:1",
                    "--key",
                    str(key),
                    "-o",
                    str(bundle),
                ),
            ),
            ("verify_session_file", ("audit", "verify", str(bundle))),
            ("export_all", ("audit", "export", "--key", str(key), "-o", str(whole))),
            ("verify_all_file", ("audit", "verify", str(whole))),
        )
        if args.bundles
        else (("verify", ("audit", "verify")), ("rebuild", ("audit", "rebuild")))
    )
    for name, command in commands:
        measured = run_child(url, *command)
        measured["events_per_second"] = round(built["events"] / measured["seconds"])
        results[name] = measured
        print(
            f"{name}: {measured['seconds']} s, {measured['events_per_second']} events/s, "
            f"peak RSS {measured['peak_rss_mb']} MB, exit {measured['exit']}",
            file=sys.stderr,
        )
    text = json.dumps(results, indent=2)
    if args.out:
        args.out.write_text(text + "\n")
    print(text)
    database.unlink(missing_ok=True)
    for path in (key, bundle, whole):
        path.unlink(missing_ok=True)
    return 0 if all(results[name]["exit"] == 0 for name, _ in commands) else 1


if __name__ == "__main__":
    sys.exit(main())

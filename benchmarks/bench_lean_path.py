#!/usr/bin/env python
"""CPU cost of the W1 append and of the W2 read-200 pipeline (issue 14), for A/B runs.

CPU time, not wall time: on a shared, loaded machine wall clock moved 3x between two runs
of the same code, CPU time much less. Run it with the Python of each checkout to compare
them (interleave the runs):

    .venv/bin/python benchmarks/bench_lean_path.py read      # ms of CPU per 200 lines
    .venv/bin/python benchmarks/bench_lean_path.py append    # us of CPU per append
    .venv/bin/python benchmarks/bench_lean_path.py read --against ../main-checkout
    .venv/bin/python benchmarks/bench_lean_path.py history   # ms of CPU per tool call
    .venv/bin/python benchmarks/bench_lean_path.py list      # ms of CPU per tool call
    .venv/bin/python benchmarks/bench_lean_path.py query     # us of CPU per store query

``read``: what ``sessions_history`` does to 200 stored lines after its query (parse,
clean the envelope, provenance, mask another session's secrets), 50 rounds, median;
with ``--against DIR``, the same with that checkout's ``with_provenance`` and ``Redactor``
(its ``domain/causality.py`` and ``domain/redaction.py``) interleaved in this process,
round by round, the outputs asserted equal.
``append``: ``record_message`` into 50 sessions round-robin on an SQLite file, 2,000
appends after 100 warm-up ones; process CPU (the loop and the writer thread) per append.
``history``: the whole ``sessions_history`` tool call (limit 200, tools included) the
peers' W2 makes, on a 20,000-message session prefilled with ``record_many``, read by
another session (so its secrets are masked); ``list``: the whole ``sessions_list`` call
(limit 50) of W3 on 2,000 one-message sessions. Both print the median process CPU of
``--calls`` calls (after 20 warm-up ones); the store's query is inside it.
``query``: the awaited store queries alone (``await store.session(key)`` and
``await store.pending_work(...)``, each a trip to a reader thread and back) on an SQLite
file, ``--calls`` of each after 100 warm-up ones: the cost of the store's awaited layer
(ADR 0044), which every tool's reads pay.
``--profile FILE`` writes a cProfile of the run on the main thread's CPU clock (the
loop's Python; the writer thread is not in it).
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import importlib.util
import json
import pstats
import statistics
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from types import ModuleType
from typing import Any
from uuid import uuid4

from sessionwire import Gateway, GatewayConfig
from sessionwire.domain.causality import with_provenance
from sessionwire.domain.redaction import DEFAULT_PATTERNS, Redactor
from sessionwire.domain.transcript import clean_for_reader

PREFIX = "agent:main:bench:group:"
NOW = datetime(2026, 1, 1, tzinfo=UTC)
TEXT = "the deploy finished but the cache warm-up is still running on two hosts " * 3


def _lines() -> list[str]:
    return [
        json.dumps(
            {
                "role": "user" if n % 2 else "assistant",
                "content": [{"type": "text", "text": f"[{n}] {TEXT}"}],
                "timestamp": 1_795_000_000_000 + n,
            },
            separators=(",", ":"),
        )
        for n in range(200)
    ]


def _pipeline(lines: list[str], provenance: Any, redactor: Any) -> list[Any]:
    shown = [provenance(clean_for_reader(json.loads(line))) for line in lines]
    return [redactor.mask(message) for message in shown]


def _module(path: Path) -> ModuleType:
    spec = importlib.util.spec_from_file_location(f"other_{path.stem}", path)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up while building
    spec.loader.exec_module(module)
    return module


def read_pipeline(rounds: int, against: Path | None) -> dict[str, float]:
    lines = _lines()
    sides = {"this": (with_provenance, Redactor(DEFAULT_PATTERNS))}
    if against is not None:
        causality = _module(against / "domain" / "causality.py")
        redaction = _module(against / "domain" / "redaction.py")
        sides["other"] = (
            causality.with_provenance,
            redaction.Redactor(redaction.DEFAULT_PATTERNS),
        )
        assert _pipeline(lines, *sides["other"]) == _pipeline(lines, *sides["this"])
    took: dict[str, list[int]] = {name: [] for name in sides}
    for _ in range(rounds):
        for name, (provenance, redactor) in sides.items():
            started = time.thread_time_ns()
            _pipeline(lines, provenance, redactor)
            took[name].append(time.thread_time_ns() - started)
    return {name: statistics.median(values) / 1e6 for name, values in took.items()}


async def append_cpu(appends: int) -> float:
    with tempfile.TemporaryDirectory() as folder:
        store = f"sqlite:///{Path(folder) / 'w1.db'}"
        gateway = await Gateway.open(config=GatewayConfig(), store=store)
        try:
            for n in range(100):
                await gateway.record_message(
                    f"{PREFIX}s{n % 50}", role="user", content=TEXT, channel="bench"
                )
            started = time.process_time()
            for n in range(appends):
                await gateway.record_message(
                    f"{PREFIX}s{n % 50}",
                    role="user" if n % 2 else "assistant",
                    content=f"[{n}] {TEXT}",
                    channel="bench",
                    chat_type="group",
                )
            return (time.process_time() - started) / appends * 1e6
        finally:
            await gateway.close()


REQUESTER = "agent:main:main"
# history and list profile their timed calls only, not the prefill.
PROFILE: cProfile.Profile | None = None
WORDS = TEXT.split()


def _message(n: int) -> dict[str, Any]:
    # ~300 bytes of JSON, as the peers' message factory makes them.
    words = [f"[w2-big#{n}]"]
    while sum(len(word) + 1 for word in words) < 240:
        words.append(WORDS[(n + len(words)) % len(WORDS)])
    return {"role": "user" if n % 2 else "assistant", "content": " ".join(words)}


async def _call_cpu(gateway: Gateway, tool: str, params: dict[str, Any], calls: int) -> float:
    """Median process CPU of one ``call_tool``, in ms; a profile covers the timed calls."""
    for _ in range(20):
        await gateway.call_tool(REQUESTER, tool, params)
    took: list[float] = []
    if PROFILE is not None:
        PROFILE.enable()
    for _ in range(calls):
        started = time.process_time()
        result = await gateway.call_tool(REQUESTER, tool, params)
        took.append(time.process_time() - started)
    if PROFILE is not None:
        PROFILE.disable()
    assert result.get("status") != "error", result
    return statistics.median(took) * 1e3


async def history_cpu(calls: int, messages: int) -> float:
    with tempfile.TemporaryDirectory() as folder:
        store = f"sqlite:///{Path(folder) / 'w2.db'}"
        gateway = await Gateway.open(config=GatewayConfig(), store=store)
        try:
            key = f"{PREFIX}w2-big"
            for start in range(0, messages, 1000):
                batch = [_message(n) for n in range(start, min(messages, start + 1000))]
                await gateway.record_many(key, batch, channel="bench", chat_type="group")
            params = {"sessionKey": key, "limit": 200, "includeTools": True}
            return await _call_cpu(gateway, "sessions_history", params, calls)
        finally:
            await gateway.close()


async def list_cpu(calls: int, sessions: int) -> float:
    with tempfile.TemporaryDirectory() as folder:
        store = f"sqlite:///{Path(folder) / 'w3.db'}"
        gateway = await Gateway.open(config=GatewayConfig(), store=store)
        try:
            for n in range(sessions):
                message = _message(n)
                await gateway.record_message(
                    f"{PREFIX}w3-s{n:04d}",
                    role=message["role"],
                    content=message["content"],
                    channel="bench",
                    chat_type="group",
                )
            return await _call_cpu(gateway, "sessions_list", {"limit": 50}, calls)
        finally:
            await gateway.close()


async def query_cpu(calls: int) -> float:
    from sessionwire.adapters.bootstrap import open_event_store
    from sessionwire.adapters.store.off_loop import open_off_loop
    from sessionwire.domain.session import Session

    with tempfile.TemporaryDirectory() as folder:
        url = f"sqlite:///{Path(folder) / 'queries.db'}"
        store = await open_off_loop(lambda: open_event_store(url, GatewayConfig()))
        try:
            opened = Session.open(key=REQUESTER, session_id=uuid4(), agent_id="main", at=NOW)
            await store.save(opened)

            async def both() -> None:
                await store.session(REQUESTER)
                await store.pending_work("run", ("queued", "running"), session_key=REQUESTER)

            for _ in range(100):
                await both()
            if PROFILE is not None:
                PROFILE.enable()
            started = time.process_time()
            for _ in range(calls):
                await both()
            took = time.process_time() - started
            if PROFILE is not None:
                PROFILE.disable()
            return took / (2 * calls) * 1e6
        finally:
            await store.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("workload", choices=["read", "append", "history", "list", "query"])
    parser.add_argument("--rounds", type=int, default=50, help="read: rounds of 200 lines")
    parser.add_argument("--appends", type=int, default=2000)
    parser.add_argument("--calls", type=int, default=200, help="history, list, query: calls timed")
    parser.add_argument("--messages", type=int, default=20_000, help="history: session size")
    parser.add_argument("--sessions", type=int, default=2_000, help="list: sessions")
    parser.add_argument("--against", type=Path, help="read: another checkout to compare")
    parser.add_argument("--profile", type=Path, help="write a cProfile (CPU clock) here")
    args = parser.parse_args()
    global PROFILE
    profile = cProfile.Profile(time.thread_time) if args.profile else None
    whole_run = args.workload in ("read", "append")
    if profile is not None and whole_run:
        profile.enable()
    else:
        PROFILE = profile
    try:
        run(args)
    finally:
        if profile is not None:
            if whole_run:
                profile.disable()
            with open(args.profile, "w") as out:
                pstats.Stats(profile, stream=out).sort_stats("cumulative").print_stats(60)


def run(args: argparse.Namespace) -> None:
    if args.workload == "read":
        medians = read_pipeline(args.rounds, args.against)
        shown = ", ".join(f"{name} {ms:.2f}" for name, ms in medians.items())
        print(f"read pipeline, ms CPU per 200 lines: {shown}")
    elif args.workload == "history":
        took = asyncio.run(history_cpu(args.calls, args.messages))
        print(f"history: {took:.3f} ms CPU per sessions_history call (limit 200)")
    elif args.workload == "list":
        took = asyncio.run(list_cpu(args.calls, args.sessions))
        print(f"list: {took:.3f} ms CPU per sessions_list call (limit 50)")
    elif args.workload == "query":
        took = asyncio.run(query_cpu(args.calls))
        print(f"query: {took:.1f} us CPU per awaited store query")
    else:
        print(f"append: {asyncio.run(append_cpu(args.appends)):.0f} us CPU per append")


if __name__ == "__main__":
    main()

#!/usr/bin/env python
"""CPU cost of the W1 append and of the W2 read-200 pipeline (issue 14), for A/B runs.

CPU time, not wall time: on a shared, loaded machine wall clock moved 3x between two runs
of the same code, CPU time much less. Run it with the Python of each checkout to compare
them (interleave the runs):

    .venv/bin/python benchmarks/bench_lean_path.py read      # ms of CPU per 200 lines
    .venv/bin/python benchmarks/bench_lean_path.py append    # us of CPU per append
    .venv/bin/python benchmarks/bench_lean_path.py read --against ../main-checkout

``read``: what ``sessions_history`` does to 200 stored lines after its query (parse,
clean the envelope, provenance, mask another session's secrets), 50 rounds, median;
with ``--against DIR``, the same with that checkout's ``with_provenance`` and ``Redactor``
(its ``domain/causality.py`` and ``domain/redaction.py``) interleaved in this process,
round by round, the outputs asserted equal.
``append``: ``record_message`` into 50 sessions round-robin on an SQLite file, 2,000
appends after 100 warm-up ones; process CPU (the loop and the writer thread) per append.
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
from pathlib import Path
from types import ModuleType
from typing import Any

from sessionwire import Gateway, GatewayConfig
from sessionwire.domain.causality import with_provenance
from sessionwire.domain.redaction import DEFAULT_PATTERNS, Redactor
from sessionwire.domain.transcript import clean_for_reader

PREFIX = "agent:main:bench:group:"
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("workload", choices=["read", "append"])
    parser.add_argument("--rounds", type=int, default=50, help="read: rounds of 200 lines")
    parser.add_argument("--appends", type=int, default=2000)
    parser.add_argument("--against", type=Path, help="read: another checkout to compare")
    parser.add_argument("--profile", type=Path, help="write a cProfile (CPU clock) here")
    args = parser.parse_args()
    profile = cProfile.Profile(time.thread_time) if args.profile else None
    if profile is not None:
        profile.enable()
    try:
        run(args)
    finally:
        if profile is not None:
            profile.disable()
            with open(args.profile, "w") as out:
                pstats.Stats(profile, stream=out).sort_stats("cumulative").print_stats(60)


def run(args: argparse.Namespace) -> None:
    if args.workload == "read":
        medians = read_pipeline(args.rounds, args.against)
        shown = ", ".join(f"{name} {ms:.2f}" for name, ms in medians.items())
        print(f"read pipeline, ms CPU per 200 lines: {shown}")
    else:
        print(f"append: {asyncio.run(append_cpu(args.appends)):.0f} us CPU per append")


if __name__ == "__main__":
    main()

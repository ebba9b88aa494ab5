#!/usr/bin/env python
"""One ``sessions_send`` exchange against the same number of raw commits (issue 38 items 4
and 8; target: ≤ 4 commits an exchange, ≤ 3× the CPU of the same raw commits).

An exchange here: ``cron:requester`` sends to ``cron:target`` and waits for the reply
(``timeoutSeconds`` 30), ``maxPingPongTurns`` 0, the announce step skipped
(``ANNOUNCE_SKIP``), an instant scripted agent, then ``wait_idle`` (the announce run has
ended); one exchange after another, on an SQLite file (WAL, ``synchronous=FULL``).

Per exchange, over ``--exchanges`` of them after a warm-up:

* **events** recorded (the log grew by), **saves** (store transactions the gateway
  asked for: ``save``/``save_async``), **commits** (the writer's transactions: a batch of
  grouped saves is one);
* **CPU** of the process (user + system, every thread: the writer's included) and wall;
* **raw**: the same number of commits, each one transaction of an UPSERT and an INSERT
  with raw ``sqlite3`` in the same durability (bench_core.RawSqlite, the peers' raw
  adapter), CPU and wall per exchange's worth.

The same for one ``sessions_spawn`` (``cron:requester`` spawns a sub-agent: its task run,
its announce run, the report into the requester's transcript), then ``wait_idle``.

Rounds interleave the gateway's exchanges, the raw commits, the spawns and theirs;
medians of the rounds.

    .venv/bin/python benchmarks/bench_exchange.py [--rounds 3] [--exchanges 100] [--out FILE]

``--profile FILE`` writes a cProfile of the timed exchanges (``--profile-spawns``: of the
timed spawns) on the loop thread's CPU clock (what the writer and reader threads spend is
not in it); ``python -m pstats FILE`` reads it.
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import json
import resource
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from bench_core import RawSqlite
from bench_runs import INSTANT, CountingSaves, config_with
from sessionwire import Gateway
from sessionwire.adapters.testkit.internals import store_of
from sessionwire.testing import ScriptedRuntime

# The sub-agent's steps (bench_spawns.py's script): its task, and an announce that reports.
SUBAGENT = [
    {"step": "subagent_task", "reply": "done: {message}"},
    {"step": "subagent_announce", "reply": "Result: done\nNotes: none"},
]
TARGET_COMMITS = 4
TARGET_RATIO = 3.0
WARM_UP = 10
FULL = "2"  # synchronous=FULL, as the gateway's SQLite store


def _cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def _events(gateway: Gateway) -> int:
    return sum(1 for _ in store_of(gateway).events())


async def _exchange(gateway: Gateway, index: int) -> None:
    result = await gateway.call_tool(
        "cron:requester",
        "sessions_send",
        {"sessionKey": "cron:target", "message": f"m{index}", "timeoutSeconds": 30},
    )
    assert result["status"] == "ok", result
    await gateway.wait_idle()  # the announce step has ended too


async def _spawn(gateway: Gateway, index: int) -> None:
    result = await gateway.call_tool("cron:requester", "sessions_spawn", {"task": f"t{index}"})
    assert result["status"] == "accepted", result
    await gateway.wait_idle()  # the child has reported


async def _ours(
    gateway: Gateway,
    exchanges: int,
    first: int,
    step: Callable[[Gateway, int], Awaitable[None]],
    profile: cProfile.Profile | None = None,
) -> dict[str, float]:
    store = store_of(gateway)
    writer = store.writer
    assert writer is not None, "a store with a writer thread"
    assert hasattr(writer, "commits"), "an SQLite store's writer (it counts its commits)"
    counter = CountingSaves(gateway)
    events, commits = _events(gateway), writer.commits
    cpu, wall = _cpu(), time.perf_counter()
    if profile is not None:
        profile.enable()
    for index in range(first, first + exchanges):
        await step(gateway, index)
    if profile is not None:
        profile.disable()
    cpu, wall = _cpu() - cpu, time.perf_counter() - wall
    return {
        "events": (_events(gateway) - events) / exchanges,
        "saves": counter.count / exchanges,
        "commits": (writer.commits - commits) / exchanges,
        "cpu_ms": cpu / exchanges * 1000,
        "wall_ms": wall / exchanges * 1000,
    }


def _raw(raw: RawSqlite, commits: int, per_exchange: float) -> dict[str, float]:
    message = {"role": "user", "content": [{"type": "text", "text": "m0 " * 8}], "timestamp": 1}
    cpu, wall = _cpu(), time.perf_counter()
    for index in range(commits):
        raw.append(f"cron:raw{index % 2}", message)
    cpu, wall = _cpu() - cpu, time.perf_counter() - wall
    return {
        "cpu_ms": cpu / commits * per_exchange * 1000,
        "wall_ms": wall / commits * per_exchange * 1000,
    }


async def measure(
    rounds: int,
    exchanges: int,
    folder: Path,
    profiles: dict[str, cProfile.Profile] | None = None,
) -> dict[str, Any]:
    """``profiles``: by kind ("" the exchanges, "spawn_" the spawns), what profiles it."""
    gateway = await Gateway.open(
        config=config_with(ping_pong_turns=0),
        store=f"sqlite:///{folder}/exchange.db",
        runtime=ScriptedRuntime.from_dict({"rules": [*SUBAGENT, *INSTANT["rules"]]}),
    )
    raw = RawSqlite(folder, FULL)
    try:
        for key in ("cron:requester", "cron:target"):
            await gateway.record_message(key, role="user", content="hi")
        for index in range(WARM_UP):
            await _exchange(gateway, -1 - index)
            await _spawn(gateway, -1 - index)
        result: dict[str, Any] = {"raw_settings": raw.settings()}
        for side in ("ours", "raw", "spawn_ours", "spawn_raw"):
            result[side] = []
        for number in range(rounds):
            for kind, step in (("", _exchange), ("spawn_", _spawn)):
                profile = (profiles or {}).get(kind)
                figures = await _ours(gateway, exchanges, number * exchanges, step, profile)
                result[f"{kind}ours"].append(figures)
                commits = max(1, round(figures["commits"] * exchanges))
                result[f"{kind}raw"].append(_raw(raw, commits, figures["commits"]))
        return result
    finally:
        raw.close()
        await gateway.close()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--exchanges", type=int, default=100)
    parser.add_argument("--out", type=Path, default=None)
    parser.add_argument("--profile", type=Path, default=None)
    parser.add_argument("--profile-spawns", action="store_true")
    args = parser.parse_args()
    profile = cProfile.Profile(time.thread_time) if args.profile is not None else None
    profiles = {("spawn_" if args.profile_spawns else ""): profile} if profile else None
    with tempfile.TemporaryDirectory() as folder:
        result = asyncio.run(measure(args.rounds, args.exchanges, Path(folder), profiles))
    if profile is not None:
        profile.dump_stats(str(args.profile))
    medians = {
        side: {
            name: statistics.median(figures[name] for figures in result[side])
            for name in result[side][0]
        }
        for side in ("ours", "raw", "spawn_ours", "spawn_raw")
    }
    ours, raw = medians["ours"], medians["raw"]
    ratio = ours["cpu_ms"] / raw["cpu_ms"]
    result.update(medians=medians, cpu_ratio=ratio)
    print(f"one sessions_send exchange, {args.rounds} rounds of {args.exchanges}, medians:")
    print(
        f"  events {ours['events']:.1f}, saves {ours['saves']:.1f}, commits {ours['commits']:.1f} "
        f"(target <= {TARGET_COMMITS}: {'met' if ours['commits'] <= TARGET_COMMITS else 'not met'})"
    )
    print(f"  CPU {ours['cpu_ms']:.2f} ms, wall {ours['wall_ms']:.2f} ms")
    print(
        f"  the same {ours['commits']:.1f} raw commits: CPU {raw['cpu_ms']:.2f} ms, "
        f"wall {raw['wall_ms']:.2f} ms"
    )
    print(
        f"  CPU ratio {ratio:.1f}x (target <= {TARGET_RATIO:g}x: "
        f"{'met' if ratio <= TARGET_RATIO else 'not met'})"
    )
    spawn, spawn_raw = medians["spawn_ours"], medians["spawn_raw"]
    result.update(spawn_cpu_ratio=spawn["cpu_ms"] / spawn_raw["cpu_ms"])
    print(
        f"one sessions_spawn (child run, announce run, report): events {spawn['events']:.1f}, "
        f"saves {spawn['saves']:.1f}, commits {spawn['commits']:.1f}, CPU {spawn['cpu_ms']:.2f} ms "
        f"(the same raw commits {spawn_raw['cpu_ms']:.2f} ms: {result['spawn_cpu_ratio']:.1f}x)"
    )
    if args.out is not None:
        args.out.write_text(json.dumps(result, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())

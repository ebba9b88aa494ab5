"""Benchmarks for runs and sessions_send (issue 3). Not tests: figures for
benchmarks/results/runs.md.

    .venv/bin/python benchmarks/bench_runs.py [--store sqlite|postgres] [--quick] [--out FILE]
        [--sends N] [--concurrent N] [--targets N] [--exchanges N]

1. End-to-end sessions_send, wait mode, instant scripted agent, maxPingPongTurns 0,
   announce skipped: sends/s, p50 latency, and the orchestration overhead per run beside
   the bare event-store cost of the saves the run needs, measured in the same run.
2. 1,000 concurrent sends over 100 target sessions: throughput, p99 latency, and a check
   that each session's runs ran in the order they were queued (the log's order).
3. A 5-turn ping-pong exchange: wall time minus agent time.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import resource
import statistics
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

import structlog
from bench_stores import drop_schema, store_url
from sessionwire import Gateway, GatewayConfig
from sessionwire.adapters.testkit.internals import internals, store_of
from sessionwire.application.ports.runtime import AgentRuntime, RunReply, RunRequest
from sessionwire.testing import ScriptedRuntime

structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING))

INSTANT = {
    "rules": [
        {"step": "announce", "reply": "ANNOUNCE_SKIP"},
        {"step": "reply_back", "reply": "pong {turn}"},
        {"reply": "done: {message}"},
    ]
}


def config_with(ping_pong_turns: int) -> GatewayConfig:
    """The benchmark's config: its cron sessions send to each other, which the default
    visibility (``tree``, decision 28) refuses between sessions neither spawned; ``agent``
    lets every session of the agent reach the others, as all did when this was written."""
    return GatewayConfig.load(
        {
            "session": {"agentToAgent": {"maxPingPongTurns": ping_pong_turns}},
            "tools": {"sessions": {"visibility": "agent"}},
        }
    )


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


class CountingSaves:
    """Counts the store transactions a workload makes: the gateway saves through
    ``save_async`` (handed to the store's writer thread), which on a store without a
    writer calls ``save`` in place; each transaction is counted once."""

    def __init__(self, gateway: Gateway) -> None:
        self.count = 0
        store = store_of(gateway)
        in_place, handed = store.save, store.save_async

        def save(*aggregates: Any) -> None:
            self.count += 1
            in_place(*aggregates)

        async def save_async(*aggregates: Any) -> None:
            if store.writer is not None:
                self.count += 1
            await handed(*aggregates)  # without a writer: ``save`` above, counted there

        store.save = save  # type: ignore[method-assign]
        store.save_async = save_async  # type: ignore[method-assign]


async def bare_save_cost(gateway: Gateway, rounds: int) -> tuple[float, float]:
    """Wall and CPU seconds (this process's, every thread) per store transaction of one
    small event: record_message's own save."""
    await gateway.record_message("cron:bare", role="user", content="x")
    stored = store_of(gateway).session("agent:main:cron:bare")
    assert stored is not None
    session = stored.to_aggregate()
    from sessionwire.domain.transcript import TranscriptMessage

    message = TranscriptMessage(role="user", content=[{"type": "text", "text": "x"}], timestamp=1)
    started, cpu_started = time.perf_counter(), time.process_time()
    for _ in range(rounds):
        session.append_message(message, at=internals(gateway).clock.now())
        store_of(gateway).save(session)
    wall, cpu = time.perf_counter() - started, time.process_time() - cpu_started
    return wall / rounds, cpu / rounds


async def send_latency(kind: str, workdir: Path, sends: int) -> dict[str, Any]:
    url, schema = store_url(kind, workdir)
    config = config_with(ping_pong_turns=0)
    gateway = await Gateway.open(
        config=config, store=url, runtime=ScriptedRuntime.from_dict(INSTANT)
    )
    try:
        await gateway.record_message("cron:requester", role="user", content="hi")
        await gateway.record_message("cron:target", role="user", content="hi")
        for _ in range(20):  # warm up
            warm = await gateway.call_tool(
                "cron:requester", "sessions_send", {"sessionKey": "cron:target", "message": "w"}
            )
            assert warm["status"] == "ok", warm
            await gateway.wait_idle()
        counter = CountingSaves(gateway)
        latencies = []
        started, cpu_started = time.perf_counter(), time.process_time()
        for index in range(sends):
            t0 = time.perf_counter()
            result = await gateway.call_tool(
                "cron:requester",
                "sessions_send",
                {"sessionKey": "cron:target", "message": f"m{index}", "timeoutSeconds": 30},
            )
            latencies.append(time.perf_counter() - t0)
            assert result["status"] == "ok", result
            await gateway.wait_idle()  # the announce step finishes before the next send
        elapsed, cpu = time.perf_counter() - started, time.process_time() - cpu_started
        saves_per_send = counter.count / sends
        bare, bare_cpu = await bare_save_cost(gateway, 500)
        per_send, cpu_per_send = elapsed / sends, cpu / sends
        runs_per_send = 2  # the primary run and the announce step
        return {
            "sends": sends,
            "sends_per_s": sends / elapsed,
            "p50_ms": statistics.median(latencies) * 1000,
            "p99_ms": percentile(latencies, 0.99) * 1000,
            "saves_per_send": saves_per_send,
            "bare_save_ms": bare * 1000,
            "per_run_ms": per_send / runs_per_send * 1000,
            "appends_per_run_ms": saves_per_send * bare / runs_per_send * 1000,
            "overhead_per_run_ms": (per_send - saves_per_send * bare) / runs_per_send * 1000,
            "overhead_to_appends": (per_send - saves_per_send * bare) / (saves_per_send * bare),
            # The same in this process's CPU time, steadier than wall time on a loaded
            # machine (a PostgreSQL server's own CPU is not in it).
            "bare_save_cpu_ms": bare_cpu * 1000,
            "cpu_per_run_ms": cpu_per_send / runs_per_send * 1000,
            "cpu_overhead_to_appends": (cpu_per_send - saves_per_send * bare_cpu)
            / (saves_per_send * bare_cpu),
        }
    finally:
        await gateway.close()
        drop_schema(schema)


class OrderRecorder(AgentRuntime):
    def __init__(self) -> None:
        self.order: dict[str, list[str]] = defaultdict(list)

    async def run(self, request: RunRequest) -> RunReply:
        if request.step == "announce":
            return RunReply("ANNOUNCE_SKIP")
        self.order[request.session_key].append(request.message)
        await asyncio.sleep(0)
        return RunReply(f"done: {request.message}")


async def concurrent_sends(kind: str, workdir: Path, sends: int, targets: int) -> dict[str, Any]:
    url, schema = store_url(kind, workdir)
    config = config_with(ping_pong_turns=0)
    runtime = OrderRecorder()
    gateway = await Gateway.open(config=config, store=url, runtime=runtime)
    try:
        await gateway.record_message("cron:requester", role="user", content="hi")
        for index in range(targets):
            await gateway.record_message(f"cron:t{index}", role="user", content="hi")
        latencies: list[float] = []

        async def send(index: int) -> None:
            t0 = time.perf_counter()
            result = await gateway.call_tool(
                "cron:requester",
                "sessions_send",
                {
                    "sessionKey": f"cron:t{index % targets}",
                    "message": f"{index:06d}",
                    "timeoutSeconds": 600,
                },
            )
            latencies.append(time.perf_counter() - t0)
            assert result["status"] == "ok", result

        started = time.perf_counter()
        # Sends are issued in index order, but each reads the store (off the loop) before
        # its run is queued, so concurrent sends reach a mailbox in any order. What must
        # hold: each target's runs run in the order they were queued (the log's order).
        tasks = []
        for index in range(sends):
            tasks.append(asyncio.create_task(send(index)))
            await asyncio.sleep(0)
        await asyncio.gather(*tasks)
        replies_done = time.perf_counter() - started
        await gateway.wait_idle()
        elapsed = time.perf_counter() - started
        queued: dict[str, list[str]] = defaultdict(list)
        for _, event in store_of(gateway).events():
            if type(event).__name__ == "RunStarted" and event.step != "announce":
                queued[event.session_key].append(event.message)
        in_order = dict(runtime.order) == dict(queued)
        return {
            "sends": sends,
            "targets": targets,
            "replies_per_s": sends / replies_done,
            "exchanges_per_s": sends / elapsed,
            "p50_ms": statistics.median(latencies) * 1000,
            "p99_ms": percentile(latencies, 0.99) * 1000,
            "per_session_order_held": in_order,
            "runs_seen": sum(len(m) for m in runtime.order.values()),
        }
    finally:
        await gateway.close()
        drop_schema(schema)


class TimedAgent(AgentRuntime):
    """Answers after a fixed real delay, and adds up the time it spent."""

    def __init__(self, delay: float) -> None:
        self.delay = delay
        self.agent_seconds = 0.0

    async def run(self, request: RunRequest) -> RunReply:
        started = time.perf_counter()
        await asyncio.sleep(self.delay)
        self.agent_seconds += time.perf_counter() - started
        if request.step == "announce":
            return RunReply("ANNOUNCE_SKIP")
        if request.step == "reply_back":
            return RunReply(f"pong {request.turn}")
        return RunReply("initial")


async def ping_pong(kind: str, workdir: Path, exchanges: int) -> dict[str, Any]:
    url, schema = store_url(kind, workdir)
    config = config_with(ping_pong_turns=5)
    results = []
    runtime = TimedAgent(0.005)
    gateway = await Gateway.open(config=config, store=url, runtime=runtime)
    try:
        await gateway.record_message("cron:a", role="user", content="hi")
        await gateway.record_message("cron:b", role="user", content="hi")
        for _ in range(exchanges):
            runtime.agent_seconds = 0.0
            started = time.perf_counter()
            sent = await gateway.call_tool(
                "cron:a",
                "sessions_send",
                {"sessionKey": "cron:b", "message": "go", "timeoutSeconds": 0},
            )
            assert sent["status"] == "accepted", sent
            await gateway.wait_idle()
            wall = time.perf_counter() - started
            results.append((wall, runtime.agent_seconds))
        turns = sum(1 for _, e in store_of(gateway).events() if type(e).__name__ == "PingPongTurn")
        assert turns == 5 * exchanges, turns
        walls = [w for w, _ in results]
        overheads = [w - a for w, a in results]
        return {
            "exchanges": exchanges,
            "runs_per_exchange": 7,
            "wall_ms_p50": statistics.median(walls) * 1000,
            "agent_ms_p50": statistics.median(a for _, a in results) * 1000,
            "overhead_ms_p50": statistics.median(overheads) * 1000,
            "overhead_per_run_ms": statistics.median(overheads) / 7 * 1000,
        }
    finally:
        await gateway.close()
        drop_schema(schema)


async def run_all(kind: str, sizes: argparse.Namespace) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as directory:
        workdir = Path(directory)
        figures = {
            "store": kind,
            "send_latency": await send_latency(kind, workdir, sizes.sends),
            "concurrent": await concurrent_sends(kind, workdir, sizes.concurrent, sizes.targets),
            "ping_pong": await ping_pong(kind, workdir, sizes.exchanges),
        }
    figures["peak_rss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return figures


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--store", choices=["sqlite", "postgres"], default="sqlite")
    parser.add_argument("--quick", action="store_true", help="small sizes (50/100/10/3)")
    parser.add_argument("--sends", type=int, help="sequential sends timed (default 500)")
    parser.add_argument("--concurrent", type=int, help="concurrent sends (default 1,000)")
    parser.add_argument("--targets", type=int, help="their target sessions (default 100)")
    parser.add_argument("--exchanges", type=int, help="5-turn ping-pongs (default 30)")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    for name, full, quick in (
        ("sends", 500, 50),
        ("concurrent", 1000, 100),
        ("targets", 100, 10),
        ("exchanges", 30, 3),
    ):
        if getattr(args, name) is None:
            setattr(args, name, quick if args.quick else full)
    figures = asyncio.run(run_all(args.store, args))
    text = json.dumps(figures, indent=2)
    print(text)
    if args.out:
        args.out.write_text(text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())

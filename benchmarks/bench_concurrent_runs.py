"""Concurrent runs on one PostgreSQL gateway (issue 22 item 6). Not a test: figures for
docs/benchmarks.md.

    .venv/bin/python benchmarks/bench_concurrent_runs.py [--runs 40 200 1000] [--delay 300]
        [--callbacks] [--out FILE]

For each size N, in a fresh process (so peak RSS is that size's own): one ``Gateway`` on
a fresh PostgreSQL schema with ``agents.defaults.maxConcurrent: N``, a ScriptedRuntime
whose primary step replies after ``delay`` seconds of a VirtualClock. N group sessions
are recorded, then N ``sessions_send`` (``timeoutSeconds: 0``: fire and forget) go one
into each, all at once. Once the gateway is idle every run is asleep on the clock (N
runs in flight together); the clock then moves past the delay and the gateway drains.

Measured: runs finished (from the store: each primary run must have exactly one
outcome event, a RunCompleted), wall time and process CPU per phase, the event loop's
lateness (a real-time ticker every 5 ms), peak RSS, and the PostgreSQL connections this
process held (pg_stat_activity sampled every 100 ms from a thread of its own; every
connection the gateway opens carries this process's PGAPPNAME).

``--callbacks`` also times every callback the loop runs (wall and the loop thread's own
CPU), samples the loop thread's stack while one has run 10 ms, and times the garbage
collector's pauses: it tells a loop blocked by a long step from one late behind many
short steps queued at once. It costs CPU; the plain run's figures are the headline.

The loop guard exempts blocking calls made under a ``benchmarks/`` frame, and this
script's ``main`` is under every loop callback: to check for SQL on the loop thread, run
``one_size`` from ``python -c`` with ``SESSIONWIRE_LOOP_GUARD=raise``.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import gc
import json
import logging
import os
import resource
import subprocess
import sys
import threading
import time
import uuid
from collections import Counter
from datetime import date
from pathlib import Path
from typing import Any

APP = f"bench-concurrent-{os.getpid()}-{uuid.uuid4().hex[:6]}"
# Set before psycopg connects: libpq names every connection this process opens.
os.environ["PGAPPNAME"] = APP

import psycopg  # noqa: E402
import structlog  # noqa: E402
from bench_stores import POSTGRES, drop_schema  # noqa: E402
from sessionwire import Gateway, GatewayConfig  # noqa: E402
from sessionwire.adapters.testkit.internals import store_of  # noqa: E402
from sessionwire.application.ports.runtime import AgentRuntime, RunReply, RunRequest  # noqa: E402
from sessionwire.domain.run import Run  # noqa: E402
from sessionwire.testing import ScriptedRuntime, VirtualClock  # noqa: E402

structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING))

TICK = 0.005
SAMPLE = 0.1
OUTCOMES = (Run.RunCompleted, Run.RunFailed, Run.RunTimedOut, Run.RunCancelled)
RESULTS = Path(__file__).parent / "results"


def script(delay: float) -> dict[str, Any]:
    return {
        "rules": [
            {"step": "announce", "reply": "ANNOUNCE_SKIP"},
            {"step": "reply_back", "reply": "REPLY_SKIP"},
            {"step": "primary", "reply": "done: {message}", "delaySeconds": delay},
        ]
    }


class CountingRuntime(AgentRuntime):
    """The scripted agent, counting the primary runs inside it at once."""

    def __init__(self, inner: AgentRuntime) -> None:
        self.inner = inner
        self.active = 0
        self.peak = 0

    async def run(self, request: RunRequest) -> RunReply:
        primary = request.step == "primary"
        if primary:
            self.active += 1
            self.peak = max(self.peak, self.active)
        try:
            return await self.inner.run(request)
        finally:
            if primary:
                self.active -= 1


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


class ConnectionSampler:
    """Counts this process's PostgreSQL connections every 100 ms, on a thread with a
    connection of its own (named apart, so it does not count itself)."""

    def __init__(self) -> None:
        self.samples: list[int] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)

    def _sample(self) -> None:
        with psycopg.connect(
            POSTGRES, autocommit=True, application_name=f"{APP}-observer"
        ) as connection:
            while not self._stop.is_set():
                row = connection.execute(
                    "SELECT count(*) FROM pg_stat_activity WHERE application_name = %s", (APP,)
                ).fetchone()
                self.samples.append(int(row[0]) if row else 0)
                self._stop.wait(SAMPLE)

    def __enter__(self) -> ConnectionSampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()


class LoopTicker:
    """How late the loop wakes a 5 ms real-time sleep, tagged with the phase it fell in."""

    def __init__(self) -> None:
        self.phase = "setup"
        self.lags: dict[str, list[float]] = {}
        self._task: asyncio.Task[None] | None = None

    async def _tick(self) -> None:
        while True:
            started = time.perf_counter()
            await asyncio.sleep(TICK)
            late = time.perf_counter() - started - TICK
            self.lags.setdefault(self.phase, []).append(max(0.0, late))

    def start(self) -> None:
        self._task = asyncio.create_task(self._tick())

    async def stop(self) -> None:
        assert self._task is not None
        self._task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self._task


class CallbackTimer:
    """Times each callback the loop runs (``--callbacks``): tells a loop blocked by one
    long step from a loop late behind many short ones queued at once."""

    def __init__(self) -> None:
        self.count = 0
        self.longest: list[tuple[float, float, str]] = []
        self._original = asyncio.events.Handle._run
        # While a callback has run 10 ms, a thread samples the loop thread's stack:
        # where a long step spends its time.
        self.running_since: float | None = None
        self.loop_thread = threading.get_ident()
        self.stacks: Counter[str] = Counter()
        self._stop = threading.Event()
        self._sampler = threading.Thread(target=self._sample_stacks, daemon=True)
        # The collector's pauses land inside whichever step allocated last.
        self.gc_pauses: dict[int, list[float]] = {}
        self._gc_started = 0.0

    def _on_gc(self, phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            self._gc_started = time.perf_counter()
        else:
            took = time.perf_counter() - self._gc_started
            self.gc_pauses.setdefault(info["generation"], []).append(took)

    def _sample_stacks(self) -> None:
        while not self._stop.wait(0.002):
            since = self.running_since
            if since is None or time.perf_counter() - since < 0.01:
                continue
            frame = sys._current_frames().get(self.loop_thread)
            where: list[str] = []
            while frame is not None and len(where) < 4:
                code = frame.f_code
                if "sessionwire" in code.co_filename or "eventsourcing" in code.co_filename:
                    where.append(f"{Path(code.co_filename).name}:{code.co_name}")
                frame = frame.f_back
            self.stacks[" < ".join(where) or "(outside sessionwire)"] += 1

    def __enter__(self) -> CallbackTimer:
        original = self._original
        timer = self

        def timed(handle: asyncio.events.Handle) -> None:
            started, cpu = time.perf_counter(), time.thread_time()
            timer.running_since = started
            original(handle)
            timer.running_since = None
            took = time.perf_counter() - started
            timer.count += 1
            if took > 0.005:
                # Wall beside the loop thread's own CPU: the rest is the thread waiting
                # (for the GIL, or descheduled on a busy machine), not the step's work.
                timer.longest.append((took, time.thread_time() - cpu, describe(handle)))

        asyncio.events.Handle._run = timed  # type: ignore[method-assign,assignment]
        self._sampler.start()
        gc.callbacks.append(self._on_gc)
        return self

    def __exit__(self, *exc: object) -> None:
        asyncio.events.Handle._run = self._original  # type: ignore[method-assign]
        self._stop.set()
        self._sampler.join()
        gc.callbacks.remove(self._on_gc)

    def figures(self) -> dict[str, Any]:
        slowest = sorted(self.longest, reverse=True)
        return {
            "callbacks": self.count,
            "over_5ms": len(slowest),
            "over_20ms": sum(1 for took, _, _ in slowest if took > 0.02),
            "over_5ms_thread_cpu_ms": round(sum(cpu for _, cpu, _ in slowest) * 1000, 1),
            "slowest_wall_cpu_ms": [
                [round(took * 1000, 1), round(cpu * 1000, 1), what]
                for took, cpu, what in slowest[:8]
            ],
            "long_step_samples_2ms": dict(self.stacks.most_common(12)),
            "gc_pauses": {
                f"gen{generation}": {
                    "count": len(pauses),
                    "total_ms": round(sum(pauses) * 1000, 1),
                    "max_ms": round(max(pauses) * 1000, 1),
                    "over_20ms": sum(1 for pause in pauses if pause > 0.02),
                }
                for generation, pauses in sorted(self.gc_pauses.items())
            },
        }


def describe(handle: asyncio.events.Handle) -> str:
    callback = getattr(handle, "_callback", None)
    task = getattr(callback, "__self__", None)
    if isinstance(task, asyncio.Task):
        return f"task {task.get_coro().__qualname__}"  # type: ignore[union-attr]
    return repr(getattr(callback, "__qualname__", callback))


def lag_figures(lags: list[float]) -> dict[str, float]:
    if not lags:
        return {"ticks": 0}
    return {
        "ticks": len(lags),
        "p50_ms": round(percentile(lags, 0.50) * 1000, 2),
        "p99_ms": round(percentile(lags, 0.99) * 1000, 2),
        "max_ms": round(max(lags) * 1000, 2),
    }


def outcomes_in(store: Any, targets: set[str]) -> dict[str, Any]:
    """Per primary run into a target session, its outcome events (read on a thread)."""
    primary: set[Any] = set()
    steps: Counter[str] = Counter()
    outcomes: dict[Any, Counter[str]] = {}
    for _, event in store.events():
        if isinstance(event, Run.RunStarted):
            steps[event.step] += 1
            # Keys are stored canonical: agent:main:discord:group:...
            key = event.session_key.split(":", 2)[-1]
            if event.step == "primary" and key in targets:
                primary.add(event.originator_id)
        elif isinstance(event, OUTCOMES):
            outcomes.setdefault(event.originator_id, Counter())[type(event).__name__] += 1
    exactly_one_completed = sum(
        1 for run in primary if outcomes.get(run, Counter()) == Counter(RunCompleted=1)
    )
    return {
        "primary_runs": len(primary),
        "primary_runs_with_exactly_one_RunCompleted": exactly_one_completed,
        "primary_runs_other_outcomes": {
            str(run): dict(outcomes.get(run, Counter()))
            for run in primary
            if outcomes.get(run, Counter()) != Counter(RunCompleted=1)
        },
        "runs_started_by_step": dict(steps),
        "outcome_events": dict(sum(outcomes.values(), Counter())),
    }


async def one_size(
    runs: int, delay: float, callbacks: CallbackTimer | None, *, paced: bool = False
) -> dict[str, Any]:
    schema = f"bench_conc_{uuid.uuid4().hex[:10]}"
    url = f"{POSTGRES}?schema={schema}"
    config = GatewayConfig.load(
        {
            "agents": {"defaults": {"maxConcurrent": runs}},
            "session": {"agentToAgent": {"maxPingPongTurns": 0}},
        }
    )
    clock = VirtualClock()
    runtime = CountingRuntime(ScriptedRuntime.from_dict(script(delay)))
    ticker = LoopTicker()
    phases: dict[str, dict[str, float]] = {}
    mark = (time.perf_counter(), cpu_seconds())

    def end_phase(name: str) -> None:
        nonlocal mark
        now = (time.perf_counter(), cpu_seconds())
        phases[name] = {
            "wall_s": round(now[0] - mark[0], 3),
            "cpu_s": round(now[1] - mark[1], 3),
        }
        mark = now

    requester = "discord:group:requester"
    targets = [f"discord:group:g{index:04d}" for index in range(runs)]
    try:
        with ConnectionSampler() as sampler:
            ticker.start()
            gateway = await Gateway.open(
                config=config,
                store=url,
                runtime=runtime,
                clock=clock,
            )
            try:
                await gateway.record_message(
                    requester, role="user", content="hi", channel="discord"
                )
                for key in targets:
                    await gateway.record_message(key, role="user", content="hi", channel="discord")
                end_phase("setup")

                ticker.phase = "send"
                sends = [
                    gateway.call_tool(
                        requester,
                        "sessions_send",
                        {"sessionKey": key, "message": f"m{index}", "timeoutSeconds": 0},
                    )
                    for index, key in enumerate(targets)
                ]
                if paced:
                    # One send's task a loop turn: the ticker is not queued behind them all.
                    tasks = []
                    for send in sends:
                        tasks.append(asyncio.ensure_future(send))
                        await asyncio.sleep(0)
                    replies = await asyncio.gather(*tasks)
                else:
                    replies = await asyncio.gather(*sends)
                statuses = Counter(str(reply.get("status")) for reply in replies)
                # Every run takes its first steps and falls asleep on the clock.
                await gateway.wait_idle()
                asleep = runtime.active
                end_phase("send")

                ticker.phase = "finish"
                await clock.advance(delay + 1)
                await gateway.wait_idle()
                end_phase("finish")
                ticker.phase = "after"
                await ticker.stop()

                checked = await asyncio.to_thread(outcomes_in, store_of(gateway), set(targets))
            finally:
                await gateway.close()
        all_lags = [lag for phase in ("send", "finish") for lag in ticker.lags.get(phase, [])]
        finished = checked["primary_runs_with_exactly_one_RunCompleted"]
        return {
            "runs": runs,
            "delay_virtual_s": delay,
            "sends_issued": "paced" if paced else "burst",
            "max_concurrent": runs,
            "send_statuses": dict(statuses),
            "runs_in_agent_at_once": asleep,
            "runs_in_agent_peak": runtime.peak,
            "runs_finished": finished,
            "all_finished_once": finished == runs and checked["primary_runs"] == runs,
            "store_check": checked,
            "wall_s": round(phases["send"]["wall_s"] + phases["finish"]["wall_s"], 3),
            "cpu_s": round(phases["send"]["cpu_s"] + phases["finish"]["cpu_s"], 3),
            "phases": phases,
            "loop_lag": lag_figures(all_lags),
            "loop_lag_by_phase": {phase: lag_figures(lags) for phase, lags in ticker.lags.items()},
            "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
            "pg_connections_peak": max(sampler.samples, default=0),
            "pg_connections_samples": len(sampler.samples),
            **({"loop_callbacks": callbacks.figures()} if callbacks is not None else {}),
        }
    finally:
        drop_schema(schema)


def load_average() -> str:
    return " ".join(f"{value:.2f}" for value in os.getloadavg())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, nargs="+", default=[40, 200, 1000])
    parser.add_argument("--delay", type=float, default=300.0)
    parser.add_argument("--one", action="store_true", help="one size, in this process")
    parser.add_argument(
        "--callbacks", action="store_true", help="also time each loop callback (slower)"
    )
    parser.add_argument(
        "--paced", action="store_true", help="issue one send a loop turn, not all at once"
    )
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    if args.one:
        if args.callbacks:
            with CallbackTimer() as timer:
                figures = asyncio.run(one_size(args.runs[0], args.delay, timer, paced=args.paced))
        else:
            figures = asyncio.run(one_size(args.runs[0], args.delay, None, paced=args.paced))
        print(json.dumps(figures))
        return
    result: dict[str, Any] = {
        "benchmark": "concurrent runs on one PostgreSQL gateway (issue 22 item 6)",
        "date": date.today().isoformat(),
        "cpus": os.cpu_count(),
        "load_before": load_average(),
        "sizes": [],
    }
    for runs in args.runs:
        # A process per size: ru_maxrss is the peak of the process's whole life.
        done = subprocess.run(
            [sys.executable, __file__, "--one", "--runs", str(runs), "--delay", str(args.delay)]
            + (["--callbacks"] if args.callbacks else [])
            + (["--paced"] if args.paced else []),
            capture_output=True,
            text=True,
            check=False,
        )
        if done.returncode != 0:
            sys.stderr.write(done.stderr)
            raise SystemExit(f"size {runs} failed (exit {done.returncode})")
        result["sizes"].append(json.loads(done.stdout.strip().splitlines()[-1]))
        print(json.dumps(result["sizes"][-1]["loop_lag"] | {"runs": runs}), file=sys.stderr)
    result["load_after"] = load_average()
    out = args.out or RESULTS / f"concurrent-runs-{result['date']}.json"
    out.write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()

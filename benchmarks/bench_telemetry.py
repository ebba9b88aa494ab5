"""What telemetry costs (ADR 0019). Not a test: figures for docs/benchmarks.md.

    .venv/bin/python benchmarks/bench_telemetry.py [--store sqlite|memory] [--rounds N]
        [--sends N] [--out FILE]

The same workload, sessions_send in wait mode to an instant scripted agent (a run, its
tool call, their appends), on a gateway with no telemetry, with Prometheus metrics, and
with Prometheus metrics plus OpenTelemetry spans (SDK, spans made and ended, exported
nowhere). The variants take turns round by round (interleaved, so drift on a shared
machine hits all alike); the figures are the median CPU time per send (this process's:
the workload's wall time is mostly waiting, which telemetry does not change) and each
variant's ratio to no telemetry.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from opentelemetry.sdk.trace import TracerProvider
from sessionwire import Gateway, GatewayConfig
from sessionwire.adapters.telemetry.otel import OpenTelemetry
from sessionwire.adapters.telemetry.prometheus import PrometheusTelemetry
from sessionwire.application.ports.telemetry import Telemetry, combined
from sessionwire.testing import ScriptedRuntime

INSTANT = {"rules": [{"step": "announce", "reply": "ANNOUNCE_SKIP"}, {"reply": "done"}]}
CONFIG = {"session": {"agentToAgent": {"maxPingPongTurns": 0}}}
VARIANTS = ("none", "prometheus", "prometheus+otel")


def telemetry_for(variant: str) -> Telemetry | None:
    if variant == "none":
        return None
    metrics = PrometheusTelemetry()
    if variant == "prometheus":
        return metrics
    return combined(metrics, OpenTelemetry(TracerProvider()))


async def one_round(store: str, variant: str, sends: int) -> float:
    """CPU seconds per send, over ``sends`` sends."""
    gateway = await Gateway.open(
        config=GatewayConfig.load(CONFIG),
        store=store,
        runtime=ScriptedRuntime.from_dict(INSTANT),
        telemetry=telemetry_for(variant),
    )
    try:
        await gateway.record_message("main", role="user", content="hi")
        await gateway.record_message("cron:job", role="user", content="hi")
        started = time.process_time()
        for number in range(sends):
            sent = await gateway.call_tool(
                "main", "sessions_send", {"sessionKey": "cron:job", "message": f"m{number}"}
            )
            assert sent["status"] == "ok", sent
        return (time.process_time() - started) / sends
    finally:
        await gateway.close()


async def measure(store_kind: str, rounds: int, sends: int) -> dict[str, Any]:
    per_send: dict[str, list[float]] = {variant: [] for variant in VARIANTS}
    with tempfile.TemporaryDirectory() as folder:
        for round_number in range(rounds):
            for variant in VARIANTS:
                store = (
                    "memory"
                    if store_kind == "memory"
                    else f"sqlite:///{folder}/{variant}-{round_number}.db"
                )
                per_send[variant].append(await one_round(store, variant, sends))
    medians = {variant: statistics.median(times) for variant, times in per_send.items()}
    return {
        "store": store_kind,
        "rounds": rounds,
        "sends_per_round": sends,
        "median_cpu_ms_per_send": {v: round(m * 1000, 3) for v, m in medians.items()},
        "ratio_to_none": {v: round(m / medians["none"], 3) for v, m in medians.items()},
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--store", choices=("sqlite", "memory"), default="memory")
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--sends", type=int, default=200)
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()
    figures = asyncio.run(measure(args.store, args.rounds, args.sends))
    text = json.dumps(figures, indent=2)
    print(text)
    if args.out is not None:
        args.out.write_text(text + "\n")


if __name__ == "__main__":
    main()

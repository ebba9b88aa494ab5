"""Benchmark of listing runs that wait for input (issue 39, ADR 0045): ``gw.runs(status=
"input_required", limit=200)`` over 200 waiting runs beside ``status="ok"`` over 200 ended
ones, on SQLite; medians of 7 interleaved rounds. A waiting run's question is read from
its own row (the runs read model keeps its status only): this is what that read costs.
Not a test: figures for docs/benchmarks.md.

    .venv/bin/python benchmarks/bench_input_listing.py
"""

import asyncio
import statistics
import tempfile
import time

from sessionwire import Gateway
from sessionwire.testing import ScriptedRuntime, VirtualClock

SCRIPT = {
    "rules": [
        {"match": "^ask", "ask": {"prompt": "ok?", "options": ["y"]}},
        {"step": "reply_back", "reply": "REPLY_SKIP"},
        {"step": "announce", "reply": "ANNOUNCE_SKIP"},
        {"reply": "done"},
    ]
}


async def main() -> None:
    d = tempfile.mkdtemp()
    gw = await Gateway.open(
        store=f"sqlite:///{d}/b.db", runtime=ScriptedRuntime.from_dict(SCRIPT), clock=VirtualClock()
    )
    await gw.record_message("main", role="user", content="hi")
    for i in range(200):
        for kind in ("ask", "say"):
            key = f"agent:main:{kind}{i}"
            await gw.record_message(key, role="user", content="hi")
            await gw.call_tool(
                "main",
                "sessions_send",
                {"sessionKey": key, "message": f"{kind} {i}", "timeoutSeconds": 0},
            )
    await gw.wait_idle()
    times: dict[str, list[float]] = {"input_required": [], "ok": []}
    for _ in range(7):
        for status in ("input_required", "ok"):
            t = time.perf_counter()
            found = await gw.runs(status=status, limit=200)
            times[status].append(time.perf_counter() - t)
            assert len(found["runs"]) == 200, (status, len(found["runs"]))
    for status, ts in times.items():
        print(
            status,
            f"median {statistics.median(ts) * 1000:.1f} ms "
            f"(min {min(ts) * 1000:.1f}, max {max(ts) * 1000:.1f})",
        )
    await gw.close()


asyncio.run(main())

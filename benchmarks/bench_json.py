#!/usr/bin/env python
"""The standard library's JSON against orjson where sessionwire reads and writes it hot
(issue 23 item 3): a history's 200 stored lines decoded, the answer's byte count, the
tool answer's HTTP body, one SSE event. CPU per operation, median of rounds, both ways in
the same process, the order alternating between rounds.

    .venv/bin/python benchmarks/bench_json.py            # 15 rounds of 200 loops
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import time
from collections.abc import Callable
from typing import Any

from fastapi.responses import JSONResponse
from pydantic_core import to_json
from sessionwire.adapters.http.json_body import OrjsonResponse, compact_json
from sessionwire.domain.json_text import decode, encoded_size

WORDS = [
    "alpha",
    "beta",
    "gamma",
    "delta",
    "epsilon",
    "zeta",
    "eta",
    "theta",
    "iota",
    "kappa",
    "lambda",
    "mu",
]


def history_lines(count: int = 200) -> list[str]:
    """Lines of ~300 bytes, as the peers' harness writes them (W2)."""
    rnd = random.Random(7)
    return [
        json.dumps(
            {
                "role": "user" if i % 2 == 0 else "assistant",
                "content": [
                    {"type": "text", "text": " ".join(rnd.choice(WORDS) for _ in range(40))}
                ],
                "timestamp": 1_795_763_819_685 + i,
                "provenance": {"kind": "user" if i % 2 == 0 else "agent"},
            },
            separators=(",", ":"),
        )
        for i in range(count)
    ]


def cpu_us(work: Callable[[], Any], loops: int) -> float:
    began = time.process_time()
    for _ in range(loops):
        work()
    return (time.process_time() - began) / loops * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--loops", type=int, default=200)
    args = parser.parse_args()
    lines = history_lines()
    joined = f"[{','.join(lines)}]"
    messages = json.loads(joined)
    answer = {"sessionKey": "agent:main:x", "messages": messages, "truncated": False}
    event = {"cursor": "12", "type": "message", "sessionKey": "k", "message": messages[0]}
    cases: dict[str, tuple[Callable[[], Any], Callable[[], Any]]] = {
        "decode 200 lines": (lambda: json.loads(joined), lambda: decode(joined)),
        "byte count of 200 messages": (
            lambda: len(to_json(messages)),
            lambda: encoded_size(messages, from_orjson=True),
        ),
        "HTTP body of a 200-message answer": (
            lambda: JSONResponse(answer).body,
            lambda: OrjsonResponse(answer).body,
        ),
        "one SSE event's data": (
            lambda: json.dumps(event, separators=(",", ":")),
            lambda: compact_json(event),
        ),
    }
    print(f"{args.rounds} rounds of {args.loops} loops, CPU µs per operation, median (min–max)")
    print("| operation | standard library | orjson | ratio |")
    print("|---|---|---|---|")
    for name, (before, after) in cases.items():
        found: dict[str, list[float]] = {"before": [], "after": []}
        for round_ in range(args.rounds):
            order = (("before", before), ("after", after))
            for side, work in order if round_ % 2 == 0 else reversed(order):
                found[side].append(cpu_us(work, args.loops))
        b, a = statistics.median(found["before"]), statistics.median(found["after"])
        print(
            f"| {name} | {b:,.0f} ({min(found['before']):,.0f}–{max(found['before']):,.0f}) "
            f"| {a:,.0f} ({min(found['after']):,.0f}–{max(found['after']):,.0f}) "
            f"| {b / a:.1f}× |"
        )


if __name__ == "__main__":
    main()

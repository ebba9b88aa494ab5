#!/usr/bin/env python
"""Where a read-200's Python went when every line was rendered on read (ADR 0054).

A diagnostic for issue 38 item 3, not a benchmark with targets: 200 lines shaped like the
peers' W2 messages (~300 bytes, user texts opening with ``[``), rendered as
``sessions_history`` rendered them on read (``history_view``, another session's reader
under the default patterns, and the session's own), and each step of it alone: joining
the lines, the pattern scan, the long-number scan with the decode, one ``orjson.loads``
of the array (what a read from the stored views still does), re-encoding, the cleaning.
Prints the minimum over ``--repeat`` runs of ``--number`` calls, in µs of process CPU.

    .venv/bin/python benchmarks/diag_history_read.py [--number 300] [--repeat 5]
"""

from __future__ import annotations

import argparse
import json
import random
import time
from collections.abc import Callable
from typing import Any

import orjson

WORDS = [
    "the",
    "a",
    "request",
    "finally",
    "succeeded",
    "after",
    "about",
    "forty",
    "seconds",
    "of",
    "waiting",
    "on",
    "upstream",
]


def lines(count: int) -> list[str]:
    rnd = random.Random(1)
    found = []
    for n in range(1, count + 1):
        words = [f"[w2-big#{n}]"]
        while sum(map(len, words)) + len(words) < 240:
            words.append(rnd.choice(WORDS))
        message = {
            "role": "user" if n % 2 else "assistant",
            "content": [{"type": "text", "text": " ".join(words)}],
            "timestamp": 1796190048762 + n,
        }
        found.append(orjson.dumps(message).decode())
    return found


def cpu(call: Callable[[], Any], number: int, repeat: int) -> float:
    best = float("inf")
    for _ in range(repeat):
        began = time.process_time()
        for _ in range(number):
            call()
        best = min(best, (time.process_time() - began) / number)
    return round(best * 1e6, 1)


def main(number: int, repeat: int) -> None:
    from sessionwire.domain.json_text import decode
    from sessionwire.domain.reader_view import _shown, history_view
    from sessionwire.domain.redaction import redactor_for

    texts = lines(200)
    redactor = redactor_for(())
    joined = "[" + ",".join(texts) + "]"
    steps: dict[str, Callable[[], Any]] = {
        "history_view, another session's reader": lambda: history_view(texts, redactor),
        "history_view, the session's own": lambda: history_view(texts, None),
        "join the lines": lambda: "[" + ",".join(texts) + "]",
        "pattern scan of the joined text": lambda: redactor.finds_nothing_in(joined),
        "long-number scan and decode": lambda: decode(joined),
        "orjson.loads of the array": lambda: orjson.loads(joined),
        "orjson.loads and dumps": lambda: orjson.dumps(orjson.loads(joined)),
        "orjson.loads and the cleaning": lambda: [_shown(m) for m in orjson.loads(joined)],
    }
    print(json.dumps({name: cpu(step, number, repeat) for name, step in steps.items()}, indent=1))


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--number", type=int, default=300)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    main(args.number, args.repeat)

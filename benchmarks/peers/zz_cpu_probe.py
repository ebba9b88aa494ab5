"""CPU per operation for every adapter of the peers' harness (issue 23: "CPU per operation,
all threads"), without changing the harness or any adapter.

Copied into a working copy of the harness's ``adapters/`` by ``benchmarks/bench_peers.py``.
The registry imports adapter modules in name order, so this one comes last: it wraps the
``append``, ``read_last`` and ``list`` of every adapter class already imported with
``time.process_time()`` (the whole process: the store's own threads count), and at
``close()`` appends one JSON line per adapter instance (one instance per workload, in the
harness's order W1, W2, W3) to ``$PEER_CPU_OUT``. No adapters of its own.
"""

from __future__ import annotations

import functools
import inspect
import json
import os
import time
from typing import Any

from .base import Adapter

MEASURED = ("append", "read_last", "list")
ADAPTERS: dict[str, Any] = {}


def _counts(adapter: Any) -> dict[str, list[float]]:
    found = adapter.__dict__.get("_cpu_probe")
    if found is None:
        found = {name: [0, 0.0] for name in MEASURED}
        adapter.__dict__["_cpu_probe"] = found
    return found


def _wrap(cls: type, name: str) -> None:
    original = cls.__dict__.get(name)
    if original is None or getattr(original, "_cpu_probed", False):
        return
    if inspect.iscoroutinefunction(original):

        @functools.wraps(original)
        async def measured_async(self: Any, *args: Any, **kwargs: Any) -> Any:
            if self.__dict__.get("_cpu_inside"):  # a subclass's call of super(): counted once
                return await original(self, *args, **kwargs)
            self.__dict__["_cpu_inside"] = True
            began = time.process_time()
            try:
                return await original(self, *args, **kwargs)
            finally:
                self.__dict__["_cpu_inside"] = False
                counted = _counts(self)[name]
                counted[0] += 1
                counted[1] += time.process_time() - began

        measured_async._cpu_probed = True  # type: ignore[attr-defined]
        setattr(cls, name, measured_async)
        return

    @functools.wraps(original)
    def measured(self: Any, *args: Any, **kwargs: Any) -> Any:
        if self.__dict__.get("_cpu_inside"):
            return original(self, *args, **kwargs)
        self.__dict__["_cpu_inside"] = True
        began = time.process_time()
        try:
            result = original(self, *args, **kwargs)
        finally:
            self.__dict__["_cpu_inside"] = False
            counted = _counts(self)[name]
            counted[0] += 1
            counted[1] += time.process_time() - began
        if inspect.isawaitable(result):  # a sync method returning an awaitable: not timed

            async def later() -> Any:
                return await result

            return later()
        return result

    measured._cpu_probed = True  # type: ignore[attr-defined]
    setattr(cls, name, measured)


def _report(adapter: Any) -> None:
    out = os.environ.get("PEER_CPU_OUT")
    if not out or adapter.__dict__.get("_cpu_reported"):
        return
    adapter.__dict__["_cpu_reported"] = True
    line = {"adapter": type(adapter).__name__, "cpu_s": _counts(adapter)}
    with open(out, "a") as file:
        file.write(json.dumps(line) + "\n")


def _wrap_close(cls: type) -> None:
    original = cls.__dict__.get("close")
    if original is None or getattr(original, "_cpu_probed", False):
        return
    if inspect.iscoroutinefunction(original):

        async def close_async(self: Any) -> Any:
            _report(self)
            return await original(self)

        close_async._cpu_probed = True  # type: ignore[attr-defined]
        cls.close = close_async  # type: ignore[attr-defined]
        return

    def close(self: Any) -> Any:
        _report(self)
        return original(self)

    close._cpu_probed = True  # type: ignore[attr-defined]
    cls.close = close  # type: ignore[attr-defined]


def _all(cls: type) -> list[type]:
    found = []
    for sub in cls.__subclasses__():
        found.append(sub)
        found.extend(_all(sub))
    return found


for _cls in [Adapter, *_all(Adapter)]:
    for _name in MEASURED:
        _wrap(_cls, _name)
    _wrap_close(_cls)

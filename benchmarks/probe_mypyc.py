#!/usr/bin/env python
"""What mypyc buys on the W1 append and the read-200 (issue 38 item 1; ADR 0065).

A probe, not a build step: ``build`` copies the installed package (the editable link
tree, ADR 0009, dereferenced) into DIR and compiles the hot modules there with mypyc,
after the few source changes mypyc needs (below); ``measure`` runs interleaved rounds of
one child process per copy (``PYTHONPATH`` pointing at it) and prints each round's CPU
per append and per read-200, and the medians. Nothing here touches the checkout.

    .venv/bin/python benchmarks/probe_mypyc.py build /tmp/mypyc-probe/compiled
    .venv/bin/python benchmarks/probe_mypyc.py copy /tmp/mypyc-probe/pure
    .venv/bin/python benchmarks/probe_mypyc.py measure /tmp/mypyc-probe/pure \\
        /tmp/mypyc-probe/compiled [--rounds 3] [--appends 2000] [--reads 300]

``child`` is one measurement (what ``measure`` runs per copy and round): ``--appends``
``Gateway.record_message`` calls as in ``diag_append_cpu.py`` (50 sessions round-robin,
after 200 warm-up ones), then ``--reads`` ``sessions_history`` calls of the newest 200
lines of a 200-line session (the peers' W2 read-last, after 20 warm-up ones). For
instruction counts, run ``child`` under callgrind at two sizes and divide the difference.

The compiled modules (``COMPILED``) are the ones an append and a read run through that
mypyc accepts. It refuses every aggregate module (``domain/session.py``, ``run.py``,
``spawn.py``, ``base.py``…: an event class nested in its aggregate's class body is an
"unsupported statement in class body"), ``application/orchestration/in_flight.py``
("async generators are unimplemented"), and crashes on ``ports/session_read_model.py``
(a KeyError in its vtable builder); ``domain/transcript.py`` compiles to C that does not
build (an undeclared ``CPyModule_pydantic___main``). The changes ``SOURCE_CHANGES``
makes: the two exceptions with ``RuntimeError`` as their second base and a
dataclass that subclasses eventsourcing's ``StoredEvent`` become non-native classes
(``@mypyc_attr(native_class=False)``), the compiled classes that interpreted ones
subclass (``Clock``, ``IdSource``, ``StoreBackend``, ``RecordsReadModels``) allow it
(``allow_interpreted_subclasses``: without it, "interpreted classes cannot inherit from
compiled" at the first ``WorkClock``), the two store classes whose methods are declared
once as generated-method descriptors (ADR 0044: ``EventSourcedStore``, ``OffLoopStore``)
are non-native too (in a native class a descriptor is only an "unsupported default
attribute value" warning, and at run time the attribute is the descriptor itself:
"'Delegated' object is not callable"), and ``SQLiteWriter._thread`` is renamed, since
mypyc names its C field ``__thread``, a C keyword to gcc. With both store classes
non-native, mypyc crashes on ``event_store.py`` (an AssertionError building
``on_log_grew``'s closure), so ``event_store.py``, ``off_loop.py`` and ``sqlite.py`` (whose
classes build on them) are left out (``REFUSED``); a change listed for a module outside
``COMPILED`` is not made.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

COMPILED = [
    "domain/keys.py",
    "domain/json_text.py",
    "domain/reader_view.py",
    "domain/redaction.py",
    "application/gateway.py",
    "application/projection.py",
    "application/unit_of_work.py",
    "application/ports/clock_and_ids.py",
    "adapters/store/serialisation.py",
    "adapters/store/sqlite_writer.py",
    "adapters/store/loop_handoff.py",
]
# Compiled in the first builds, and refused in the end (see the module's docstring).
REFUSED = [
    "adapters/store/event_store.py",
    "adapters/store/off_loop.py",
    "adapters/store/sqlite.py",
]
NATIVE_OFF = "@mypyc_attr(native_class=False)\n"
SUBCLASSED = "@mypyc_attr(allow_interpreted_subclasses=True)\n"
IMPORT = "from __future__ import annotations\n"
SOURCE_CHANGES: dict[str, list[tuple[str, str]]] = {
    "adapters/store/event_store.py": [
        ("class WriterClosed(", NATIVE_OFF + "class WriterClosed("),
        ("class RecordsReadModels:", SUBCLASSED + "class RecordsReadModels:"),
        ("class StoreBackend(", SUBCLASSED + "class StoreBackend("),
        ("class EventSourcedStore(", NATIVE_OFF + "class EventSourcedStore("),
    ],
    "application/ports/clock_and_ids.py": [
        ("class Clock(", SUBCLASSED + "class Clock("),
        ("class IdSource(", SUBCLASSED + "class IdSource("),
    ],
    "adapters/store/off_loop.py": [
        ("class StoreClosed(", NATIVE_OFF + "class StoreClosed("),
        ("class OffLoopStore(", NATIVE_OFF + "class OffLoopStore("),
    ],
    "adapters/store/serialisation.py": [
        (
            "@dataclass(frozen=True)\nclass StoredMessage(",
            NATIVE_OFF + "@dataclass(frozen=True)\nclass StoredMessage(",
        )
    ],
    "adapters/store/sqlite_writer.py": [("self._thread", "self._writer_thread")],
}
MYPY_INI = """[mypy]
python_version = 3.11
strict = True
plugins = pydantic.mypy

[mypy-json5,eventsourcing.*,psycopg.*,yaml,re2,google.protobuf.*,croniter]
ignore_missing_imports = True
"""

REQUESTER = "agent:main:main"
READ_WARM_UP = 20


def copy_package(target: Path) -> Path:
    """The installed package's files (the link tree dereferenced) under ``target``."""
    import sessionwire

    source = Path(sessionwire.__file__).parent
    if target.exists():
        shutil.rmtree(target)
    target.mkdir(parents=True)
    shutil.copytree(
        source,
        target / "sessionwire",
        symlinks=False,
        ignore=shutil.ignore_patterns("__pycache__", "*.so"),
    )
    return target


def build(target: Path) -> None:
    copy_package(target)
    package = target / "sessionwire"
    for module, changes in SOURCE_CHANGES.items():
        if module not in COMPILED:
            continue
        path = package / module
        text = path.read_text()
        for old, new in changes:
            if old not in text:
                raise SystemExit(f"{module}: {old!r} not found; the probe's changes are stale")
            text = text.replace(old, new)
        if "@mypyc_attr(" in text:
            text = text.replace(IMPORT, IMPORT + "\nfrom mypy_extensions import mypyc_attr\n", 1)
        path.write_text(text)
    (target / "mypy.ini").write_text(MYPY_INI)
    mypyc = Path(sys.executable).parent / "mypyc"
    started = time.monotonic()
    cpu_started = os.times()
    subprocess.run(
        [str(mypyc), *(f"sessionwire/{module}" for module in COMPILED)], cwd=target, check=True
    )
    cpu = os.times()
    took = (cpu.children_user + cpu.children_system) - (
        cpu_started.children_user + cpu_started.children_system
    )
    print(f"built in {time.monotonic() - started:.0f} s wall, {took:.0f} s CPU")


async def child(appends: int, reads: int) -> dict[str, float | str]:
    import sessionwire

    # diag_append_cpu's W1 loop, imported here so that it takes the copy on PYTHONPATH.
    from diag_append_cpu import PREFIX, TEXT, appends_on
    from sessionwire import Gateway, GatewayConfig
    from sessionwire.application import gateway as gateway_module

    found: dict[str, float | str] = {
        "package": str(Path(sessionwire.__file__).parent),
        "compiled": str(gateway_module.__file__).endswith(".so"),
    }
    with tempfile.TemporaryDirectory() as directory:
        gateway = await Gateway.open(config=GatewayConfig(), store=f"sqlite:///{directory}/p.db")
        try:
            cpu = await appends_on(gateway, appends)
            if appends:
                found["append"] = cpu["process"]
                found["append_loop"] = cpu["loop"]
                found["append_writer"] = cpu["writer"]
            key = f"{PREFIX}read"
            await gateway.record_many(
                key,
                [
                    {"role": "user" if n % 2 else "assistant", "content": f"[{n}] {TEXT}"}
                    for n in range(200)
                ],
                channel="bench",
                chat_type="group",
            )
            arguments = {"sessionKey": key, "limit": 200, "includeTools": True}

            async def read() -> None:
                result = await gateway.call_tool(REQUESTER, "sessions_history", arguments)
                if len(result["messages"]) != 200:
                    raise RuntimeError(f"read {len(result['messages'])} lines: {result}")

            for _ in range(READ_WARM_UP):
                await read()
            process_started = time.process_time()
            for _ in range(reads):
                await read()
            if reads:
                found["read_200"] = (time.process_time() - process_started) * 1e6 / reads
        finally:
            await gateway.close()
    return found


def measure(copies: list[Path], rounds: int, appends: int, reads: int) -> None:
    table: dict[str, list[dict[str, float | str]]] = {str(c): [] for c in copies}
    for number in range(1, rounds + 1):
        for copy in copies:
            env = {**os.environ, "PYTHONPATH": str(copy)}
            out = subprocess.run(
                [
                    sys.executable,
                    __file__,
                    "child",
                    "--appends",
                    str(appends),
                    "--reads",
                    str(reads),
                ],
                env=env,
                check=True,
                capture_output=True,
                text=True,
                cwd=tempfile.gettempdir(),
            ).stdout
            figures = json.loads(out)
            table[str(copy)].append(figures)
            print(f"round {number} {copy} load {os.getloadavg()[0]:.1f}: {out.strip()}", flush=True)
    for copy, runs in table.items():
        medians = {
            name: round(statistics.median(float(run[name]) for run in runs))
            for name in ("append", "append_loop", "append_writer", "read_200")
        }
        print(f"median {copy}: {json.dumps(medians)}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)
    commands.add_parser("build").add_argument("target", type=Path)
    commands.add_parser("copy").add_argument("target", type=Path)
    measuring = commands.add_parser("measure")
    measuring.add_argument("copies", type=Path, nargs="+")
    for command in (measuring, commands.add_parser("child")):
        command.add_argument("--appends", type=int, default=2000)
        command.add_argument("--reads", type=int, default=300)
    measuring.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    if args.command == "build":
        build(args.target)
    elif args.command == "copy":
        copy_package(args.target)
    elif args.command == "measure":
        measure(args.copies, args.rounds, args.appends, args.reads)
    else:
        print(json.dumps(asyncio.run(child(args.appends, args.reads))))


if __name__ == "__main__":
    main()

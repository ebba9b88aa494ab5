#!/usr/bin/env python
"""How much CPU ``sessionwire serve`` spends before it listens, beyond its imports
(issue 38 item 7: ≤ 1 s of CPU after imports).

Each round runs, interleaved:

* **serve**: ``sessionwire --store sqlite:///… serve --port N`` until it prints its
  ``listening on`` line; its CPU then (user + system, every thread, from
  ``/proc/PID/stat``) and the wall time to that line;
* **after imports**: the same command in a process that first imports every module serve
  had imported by then (found once, first, with ``python -X importtime``), says its CPU
  once they are in, then runs the command: the CPU from there to the listening line is
  serve's own work (reading the config, opening the store, reading the file once for
  damage, building the app and its routes, binding the port).

Medians of ``--rounds``; the store is a small SQLite file.

    .venv/bin/python benchmarks/bench_serve_startup.py [--rounds 5] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

TARGET_CPU_AFTER_IMPORTS = 1.0
LISTENING = "listening on"
TOKEN = "bench-serve-startup-token-0123456789"


def _cli() -> list[str]:
    script = Path(sys.executable).parent / "sessionwire"
    if script.exists():
        return [str(script)]
    return [sys.executable, "-m", "sessionwire.adapters.cli.main"]


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _cpu_seconds(pid: int) -> float:
    with open(f"/proc/{pid}/stat") as stat:
        fields = stat.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _serve(argv: list[str], env: dict[str, str]) -> tuple[float, float, list[str]]:
    """Wall and CPU seconds to the listening line, and the lines of stderr before it."""
    argv = [*argv, "serve", "--port", str(_free_port())]
    started = time.perf_counter()
    process = subprocess.Popen(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    assert process.stderr is not None
    lines = []
    try:
        for raw in process.stderr:
            line = raw.decode(errors="replace")
            if LISTENING in line:
                return time.perf_counter() - started, _cpu_seconds(process.pid), lines
            lines.append(line)
        raise RuntimeError("serve ended before listening:\n" + "".join(lines))
    finally:
        process.terminate()
        process.wait()


def _modules_at_listening(store: str, env: dict[str, str]) -> list[str]:
    argv = [sys.executable, "-X", "importtime", "-m", "sessionwire.adapters.cli.main"]
    _, _, lines = _serve([*argv, "--store", store], env)
    modules = []
    for line in lines:
        if line.startswith("import time:") and "|" in line:
            name = line.rsplit("|", 1)[1].strip()
            if name and not name.startswith("package"):
                modules.append(name)
    return modules


# Imports what serve imports, says its CPU, then runs the command line as serve.
PREIMPORTED = """
import importlib, resource, sys
modules, argv = sys.argv[1].split(","), sys.argv[2:]
for name in modules:
    try:
        importlib.import_module(name)
    except Exception:
        pass
usage = resource.getrusage(resource.RUSAGE_SELF)
print(f"imported {usage.ru_utime + usage.ru_stime}", file=sys.stderr, flush=True)
from sessionwire.adapters.cli.main import main
sys.argv = ["sessionwire", *argv]
main()
"""


def _after_imports(modules: list[str], store: str, env: dict[str, str]) -> float:
    argv = [sys.executable, "-c", PREIMPORTED, ",".join(modules), "--store", store]
    _, cpu, lines = _serve(argv, env)
    imported = next(float(line.split()[1]) for line in lines if line.startswith("imported "))
    return cpu - imported


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args()

    env = {**os.environ, "SESSIONWIRE_TOKEN": TOKEN}
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    with tempfile.TemporaryDirectory() as folder:
        store = f"sqlite:///{folder}/serve.db"
        subprocess.run(
            [*_cli(), "--store", store, "record", "main", "hello"],
            env=env,
            check=True,
            capture_output=True,
        )
        modules = _modules_at_listening(store, env)
        serve: list[tuple[float, float]] = []
        after: list[float] = []
        for _ in range(args.rounds):
            wall, cpu, _ = _serve([*_cli(), "--store", store], env)
            serve.append((wall, cpu))
            after.append(_after_imports(modules, store, env))
    medians = {
        "serve_wall_s": statistics.median(wall for wall, _ in serve),
        "serve_cpu_s": statistics.median(cpu for _, cpu in serve),
        "cpu_after_imports_s": statistics.median(after),
    }
    after_imports = medians["cpu_after_imports_s"]
    met = "met" if after_imports <= TARGET_CPU_AFTER_IMPORTS else "not met"
    print(f"modules imported by serve when listening: {len(modules)}")
    print(
        f"serve to listening: wall {medians['serve_wall_s']:.3f} s, "
        f"CPU {medians['serve_cpu_s']:.3f} s"
    )
    print(
        f"serve's CPU after its imports: {after_imports:.3f} s "
        f"(target <= {TARGET_CPU_AFTER_IMPORTS:g} s: {met})"
    )
    if args.json is not None:
        result = {
            "rounds": args.rounds,
            "modules": len(modules),
            "serve": serve,
            "after_imports": after,
            "medians": medians,
        }
        args.json.write_text(json.dumps(result, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())

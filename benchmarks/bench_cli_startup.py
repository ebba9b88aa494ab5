"""How fast the ``sessionwire`` command starts, as a ratio to a bare Python baseline.

Issue 11's target: ``sessionwire sessions list`` on a small SQLite store, and
``sessionwire --help``, each at most 2x ``python -c "import pydantic, structlog, click"``,
measured in one run. The commands are run interleaved (baseline, help, list, record,
baseline, …) so a machine that gets busier or quieter during the run affects them alike;
each figure is the median of its runs. Wall time is what a person waits; CPU time (user +
system, the child's rusage) is what the work costs, and on a shared, loaded machine it
is the steadier figure. The peak resident memory is the largest a run of that command
reached (the child's ``ru_maxrss``).

Python caches compiled bytecode; the runs here use it as an installed package would
(``compileall`` first, since ``PYTHONDONTWRITEBYTECODE`` may be set).

    .venv/bin/python benchmarks/bench_cli_startup.py            # 15 rounds
    .venv/bin/python benchmarks/bench_cli_startup.py --rounds 5 --json out.json
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

TARGET_RATIO = 2.0


def commands(store: str) -> dict[str, list[str]]:
    python = sys.executable
    # The installed console script, as people run it (`python -m` when there is none).
    script = Path(python).parent / "sessionwire"
    cli = [str(script)] if script.exists() else [python, "-m", "sessionwire.adapters.cli.main"]
    return {
        "baseline": [python, "-c", "import pydantic, structlog, click"],
        "--help": [*cli, "--help"],
        "sessions list": [*cli, "--store", store, "sessions", "list"],
        "record": [*cli, "--store", store, "record", "main", "hello"],
    }


def run_once(argv: list[str], env: dict[str, str]) -> tuple[float, float, int]:
    """Wall seconds, CPU seconds and peak RSS (KiB) of one run of ``argv``."""
    started = time.perf_counter()
    process = subprocess.Popen(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, _, usage = os.wait4(process.pid, 0)
    elapsed = time.perf_counter() - started
    process.returncode = 0  # reaped by wait4 above
    if process.stderr is not None:
        errors = process.stderr.read().decode(errors="replace").strip()
        process.stderr.close()
        if errors:
            print(f"stderr of {argv}: {errors}", file=sys.stderr)
    # Linux reports ru_maxrss in KiB.
    return elapsed, usage.ru_utime + usage.ru_stime, usage.ru_maxrss


def compile_package(python: str) -> None:
    """Write sessionwire's bytecode, as ``pip install`` does (editable installs do not)."""
    find = (
        "import importlib.util as u; print(*u.find_spec('sessionwire').submodule_search_locations)"
    )
    found = subprocess.run([python, "-c", find], capture_output=True, text=True, check=True)
    package = found.stdout.strip()
    subprocess.run([python, "-m", "compileall", "-q", package], check=True, capture_output=True)


def measure(rounds: int, workdir: Path) -> dict[str, dict[str, float]]:
    store = f"sqlite:///{workdir}/startup.db"
    env = {**os.environ, "SESSIONWIRE_STORE": store}
    named = commands(store)
    # A small store: three sessions with a message each.
    for key in ("main", "discord:group:dev", "cron:nightly"):
        argv = [*named["record"][:-2], key, "hello"]
        subprocess.run(argv, env=env, check=True, capture_output=True)
    compile_package(named["baseline"][0])
    for argv in named.values():  # warm the file cache
        run_once(argv, env)
    walls: dict[str, list[float]] = {name: [] for name in named}
    cpus: dict[str, list[float]] = {name: [] for name in named}
    peaks: dict[str, int] = dict.fromkeys(named, 0)
    for _ in range(rounds):
        for name, argv in named.items():
            wall, cpu, peak = run_once(argv, env)
            walls[name].append(wall)
            cpus[name].append(cpu)
            peaks[name] = max(peaks[name], peak)
    wall_base = statistics.median(walls["baseline"])
    cpu_base = statistics.median(cpus["baseline"])
    return {
        name: {
            "wall_ms": statistics.median(walls[name]) * 1000,
            "wall_ratio": statistics.median(walls[name]) / wall_base,
            "cpu_ms": statistics.median(cpus[name]) * 1000,
            "cpu_ratio": statistics.median(cpus[name]) / cpu_base,
            "peak_rss_mib": peaks[name] / 1024,
        }
        for name in named
    }


def table(results: dict[str, dict[str, float]], rounds: int) -> str:
    lines = [
        f"CLI start-up, {rounds} interleaved rounds, medians (target: ratio <= {TARGET_RATIO})",
        f"{'command':<15}{'wall ms':>8}{'ratio':>7}{'CPU ms':>8}{'ratio':>7}{'peak RSS MiB':>14}",
    ]
    for name, row in results.items():
        worst = max(row["wall_ratio"], row["cpu_ratio"])
        mark = "" if name == "baseline" or worst <= TARGET_RATIO else "  over target"
        lines.append(
            f"{name:<15}{row['wall_ms']:>8.0f}{row['wall_ratio']:>7.2f}"
            f"{row['cpu_ms']:>8.0f}{row['cpu_ratio']:>7.2f}{row['peak_rss_mib']:>14.1f}{mark}"
        )
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=15, help="interleaved rounds (15)")
    parser.add_argument("--json", type=Path, help="also write the figures to this file")
    args = parser.parse_args()
    workdir = Path(tempfile.mkdtemp(prefix="sw-startup-"))
    try:
        results = measure(args.rounds, workdir)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    print(table(results, args.rounds))
    print(f"python {sys.version.split()[0]}, {os.cpu_count()} CPUs, load {os.getloadavg()[0]:.1f}")
    if args.json is not None:
        args.json.write_text(json.dumps({"rounds": args.rounds, "results": results}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())

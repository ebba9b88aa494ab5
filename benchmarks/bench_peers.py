#!/usr/bin/env python
"""sessionwire against the peer session stores, on the peers' own workload (issue 14).

Runs the peers' harness (``../shared/bench/peer_bench``, beside this clone) on W1/W2/W3:

- the peers (OpenAI Agents ``SQLiteSession``, eventsourcing with its aggregate cache,
  LangGraph ``SqliteSaver``, ADK ``SqliteSessionService``) and raw ``sqlite3`` (WAL with
  ``synchronous=FULL`` and ``NORMAL``) run with the Python of a venv of their own,
  ``~/.cache/sessionwire-peer-bench`` (``--venv``), created here on first use from the
  harness's pinned ``requirements.txt``. The peers never enter the project's environment;
- sessionwire runs with the Python that runs this script (the project's ``.venv``),
  through ``benchmarks/peers/sessionwire_adapter.py``.

Every (adapter, repetition) is its own worker process, one at a time, repetitions
interleaved; each workload gets a fresh file. The harness prints medians (min–max), the
disk size of each workload's files and the peak RSS of each worker.

    .venv/bin/python benchmarks/bench_peers.py                      # 3 reps, full sizes
    .venv/bin/python benchmarks/bench_peers.py --reps 1 --scale 0.02 -a sessionwire-sqlite

Not run in CI (tests/e2e runs our own adapter at tiny counts, to keep the script working).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
OURS = "sessionwire-sqlite"
PEERS = (
    "sqlite-wal-full",
    "sqlite-wal-normal",
    "openai-agents-sqlite",
    "eventsourcing-sqlite-cache",
    "langgraph-sqlite",
    "adk-sqlite",
)
DEFAULT_VENV = Path.home() / ".cache" / "sessionwire-peer-bench"
# The shared harness's own adapter for us is replaced by ours (same row name).
REPLACED = "sessionwire_gateway.py"
SCALED = ("w1_messages", "w2_messages", "w3_sessions")
SIZES = {
    "w1_messages": 5000,
    "w1_sessions": 50,
    "w2_messages": 20000,
    "w2_reads": 30,
    "w2_appends": 30,
    "w2_read_n": 200,
    "read_all_reps": 5,
    "w3_sessions": 2000,
    "w3_lists": 20,
    "w3_limit": 50,
}


class Missing(SystemExit):
    pass


def find_harness(shared: str | None) -> Path:
    """The peers' harness: ``--shared``, $SESSIONWIRE_SHARED, or ``../shared`` beside the
    clone (where CI keeps it), or beside the main clone of a git worktree."""
    candidates = [
        Path(shared) if shared else None,
        Path(os.environ["SESSIONWIRE_SHARED"]) if os.environ.get("SESSIONWIRE_SHARED") else None,
        REPO.parent / "shared",
        *main_clone_shared(),
    ]
    for base in candidates:
        if base is not None and (base / "bench" / "peer_bench" / "bench.py").is_file():
            return base / "bench" / "peer_bench"
    tried = ", ".join(str(c) for c in candidates if c is not None)
    raise Missing(
        "bench_peers: the peers' harness was not found (looked for bench/peer_bench/bench.py "
        f"under: {tried}).\nIt lives in the project's shared folder, checked out beside this "
        "clone as ../shared; pass --shared PATH or set SESSIONWIRE_SHARED to where it is."
    )


def main_clone_shared() -> list[Path]:
    """``../shared`` beside the main clone, when this is one of its git worktrees."""
    try:
        common = subprocess.run(
            ["git", "rev-parse", "--path-format=absolute", "--git-common-dir"],
            cwd=REPO,
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return []
    return [Path(common).parent.parent / "shared"]


def peer_python(venv: Path, requirements: Path, *, install: bool) -> Path:
    """The peers' Python, in their own venv (created and filled on first use)."""
    python = venv / "bin" / "python"
    if python.exists():
        return python
    if not install:
        raise Missing(f"bench_peers: no peer venv at {venv}; run without --no-install")
    print(f"creating the peers' venv {venv} from {requirements}", flush=True)
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    subprocess.run([str(python), "-m", "pip", "install", "-q", "-r", str(requirements)], check=True)
    return python


def harness_copy(harness: Path, into: Path) -> Path:
    """A working copy of the harness with our adapter added (the shared copy is untouched)."""
    copy = into / "peer_bench"
    shutil.copytree(
        harness,
        copy,
        ignore=shutil.ignore_patterns("out", "__pycache__", REPLACED),
    )
    shutil.copy(
        HERE / "peers" / "sessionwire_adapter.py", copy / "adapters" / "sessionwire_ours.py"
    )
    # CPU per operation, all threads, for every adapter (imported last, it wraps the rest).
    shutil.copy(HERE / "peers" / "zz_cpu_probe.py", copy / "adapters" / "zz_cpu_probe.py")
    return copy


def cpu_of(cpu_file: Path, workloads: str) -> dict[str, float]:
    """CPU per operation (µs, all threads) from the probe's lines: one per workload, in
    the order the harness runs them."""
    if not cpu_file.exists():
        return {}
    lines = [json.loads(line) for line in cpu_file.read_text().splitlines() if line.strip()]
    found: dict[str, float] = {}
    for workload, line in zip([w for w in workloads.split(",") if w], lines, strict=False):
        for op, (count, seconds) in line["cpu_s"].items():
            if count:
                found[f"{workload}_{op}_cpu_us"] = seconds / count * 1e6
    return found


def cpu_table(results: list[dict[str, object]], names: list[str]) -> str:
    """Medians (min–max) of CPU per operation, µs, all threads of the worker."""
    columns = [
        ("W1 append", "w1_append_cpu_us"),
        ("W2 read-200", "w2_read_last_cpu_us"),
        ("W2 append-into-big", "w2_append_cpu_us"),
        ("W3 list-50", "w3_list_cpu_us"),
    ]
    rows = [
        "",
        "CPU per operation, µs (process CPU, all threads; median (min–max) over reps):",
        "",
        "| adapter | " + " | ".join(title for title, _ in columns) + " |",
        "|---|" + "---|" * len(columns),
    ]
    for name in names:
        cells = []
        for _, key in columns:
            values = sorted(
                float(cpu[key])  # type: ignore[index]
                for r in results
                if r.get("adapter", r.get("name")) == name
                and isinstance(cpu := r.get("cpu"), dict)
                and key in cpu
            )
            if not values:
                cells.append("–")
                continue
            median = values[len(values) // 2]
            cells.append(f"{median:,.0f} ({values[0]:,.0f}–{values[-1]:,.0f})")
        rows.append(f"| {name} | " + " | ".join(cells) + " |")
    return "\n".join(rows) + "\n"


def sizes(scale: float) -> dict[str, int]:
    chosen = dict(SIZES)
    for name in SCALED:
        chosen[name] = max(1, int(chosen[name] * scale))
    chosen["w1_messages"] = max(chosen["w1_messages"], chosen["w1_sessions"])
    chosen["w2_messages"] = max(chosen["w2_messages"], chosen["w2_read_n"])
    chosen["w3_sessions"] = max(chosen["w3_sessions"], chosen["w3_limit"])
    return chosen


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("-a", "--adapters", default=",".join((OURS, *PEERS)))
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--scale", type=float, default=1.0, help="multiplies the counts")
    parser.add_argument("--workloads", default="w1,w2,w3")
    parser.add_argument("--shared", help="the shared folder (default: ../shared)")
    parser.add_argument("--venv", type=Path, default=DEFAULT_VENV, help="the peers' venv")
    parser.add_argument("--no-install", action="store_true", help="never create the venv")
    parser.add_argument("--out", type=Path, help="results folder (default: a temp dir)")
    parser.add_argument("--timeout", type=int, default=900, help="seconds per worker")
    args = parser.parse_args(argv)
    names = [name for name in args.adapters.split(",") if name]

    harness = find_harness(args.shared)
    python_of = {OURS: Path(sys.executable)}
    if any(name != OURS for name in names):
        peers = peer_python(args.venv, harness / "requirements.txt", install=not args.no_install)
        python_of.update({name: peers for name in names if name != OURS})

    out = args.out or Path(tempfile.mkdtemp(prefix="bench-peers-"))
    out.mkdir(parents=True, exist_ok=True)
    params = sizes(args.scale)
    flags = [
        part
        for name, value in params.items()
        for part in (f"--{name.replace('_', '-')}", str(value))
    ]
    results = []
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="peer-harness-") as scratch:
        copy = harness_copy(harness, Path(scratch))
        for rep in range(1, args.reps + 1):
            for name in names:
                result_file = out / f"{name}.rep{rep}.json"
                command = [
                    str(python_of[name]), str(copy / "bench.py"), "worker", "--adapter", name,
                    "--rep", str(rep), "--json", str(result_file), "--workloads", args.workloads,
                    *flags,
                ]  # fmt: skip
                began = time.perf_counter()
                cpu_file = out / f"{name}.rep{rep}.cpu.jsonl"
                cpu_file.unlink(missing_ok=True)
                env = {**os.environ, "PEER_CPU_OUT": str(cpu_file)}
                with open(out / f"{name}.rep{rep}.log", "w") as log:
                    try:
                        code: object = subprocess.run(
                            command,
                            stdout=log,
                            stderr=subprocess.STDOUT,
                            timeout=args.timeout,
                            env=env,
                        ).returncode
                    except subprocess.TimeoutExpired:
                        code = "timeout"
                wall = time.perf_counter() - began
                if result_file.exists():
                    result = json.loads(result_file.read_text())
                else:
                    result = {"adapter": name, "name": name, "rep": rep}
                    result["errors"] = {"process": f"exit {code}, see {log.name}"}
                result["wall_s"] = wall
                result["cpu"] = cpu_of(cpu_file, args.workloads)
                results.append(result)
                errors = f" errors={result['errors']}" if result.get("errors") else ""
                print(f"rep {rep} {name:30s} {wall:6.1f}s{errors}", flush=True)
        meta = {
            "command": " ".join(["bench_peers.py", *(argv if argv is not None else sys.argv[1:])]),
            "platform": platform.platform(),
            "cpus": os.cpu_count(),
            "params": params,
            "total_wall_s": time.perf_counter() - started,
        }
        summary = out / "results.json"
        summary.write_text(json.dumps({"meta": meta, "results": results}, indent=1))
        table = subprocess.run(
            [sys.executable, str(copy / "bench.py"), "table", str(summary)],
            capture_output=True,
            text=True,
            check=True,
        ).stdout
    table += cpu_table(results, names)
    (out / "table.md").write_text(table)
    print(f"\n{table}\nresults in {out}")
    failed = [r for r in results if r.get("errors")]
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())

"""``sessionwire simulate``: seeded random workloads against a real gateway, invariants
checked after every step, a failing seed shrunk to a minimal replayable script.

Exit codes: 0 no invariant broken, 1 some broken, 2 bad usage (an unknown store or
invariant, a file that is not a script, the global ``--store``).
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import sys
import threading
import time
from collections import Counter
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click
from sessionwire.adapters.cli.context import EXIT_OK, EXIT_REFUSED, EXIT_USAGE, CliOptions, fail

if TYPE_CHECKING:  # the simulator is imported when the command runs, not with the CLI
    from sessionwire.adapters.testkit.simulator import (
        FreshStores,
        Simulation,
        SimulationResult,
        SimulationScript,
        WorkloadOptions,
    )

pass_options = click.make_pass_decorator(CliOptions)


@click.command("simulate")
@click.option(
    "--seeds",
    default=100,
    show_default=True,
    type=click.IntRange(min=0),
    help="how many seeds to play, from --start on",
)
@click.option("--start", default=0, show_default=True, type=int, help="the first seed")
@click.option(
    "--store",
    "store_spec",
    default="sqlite",
    show_default=True,
    help="sqlite (a temporary directory), sqlite:///DIR, memory (faster, plays no crash), "
    "postgres or a postgresql:// URL (a fresh store per seed)",
)
@click.option(
    "--steps",
    default=16,
    show_default=True,
    type=click.IntRange(min=0),
    help="steps in each seed's workload",
)
@click.option("--skip", multiple=True, help="an invariant not to check (repeat)")
@click.option(
    "--replay",
    "replay",
    type=click.Path(dir_okay=False, path_type=Path),
    help="run this script (a saved reproduction) instead of seeds",
)
@click.option(
    "--save",
    "save_dir",
    type=click.Path(file_okay=False, path_type=Path),
    help="write each shrunk reproduction here as seed-N.json",
)
@click.option("--shrink/--no-shrink", default=True, help="shrink the first failing seed")
@click.option(
    "--first-failure",
    is_flag=True,
    help="stop after the first failing seed (planted-bug scores: the CPU to a find)",
)
@click.option(
    "--two-gateways",
    is_flag=True,
    help="PostgreSQL: two gateways on the store; a crash kills one, the other takes over",
)
@click.option(
    "--stale-owners/--no-stale-owners",
    default=True,
    show_default=True,
    help="with --two-gateways: a gateway paused past its lease comes back and writes",
)
@click.option(
    "--dropped-connections",
    is_flag=True,
    help="PostgreSQL: saves lose their connection at COMMIT (committed or not)",
)
@click.option(
    "--budgets/--no-budgets",
    default=True,
    show_default=True,
    help="a trace budget in each seed's config (session.agentToAgent.budget)",
)
@click.option(
    "--steers/--no-steers",
    default=True,
    show_default=True,
    help="subagents steers into children, and sends back into a session running their "
    "sender's ancestor (the busy policy steer)",
)
@click.option(
    "--nested-spawns/--no-nested-spawns",
    default=True,
    show_default=True,
    help="children that send and spawn (maxSpawnDepth 1-3), trees cancelled through an "
    "ended middle",
)
@click.option(
    "--store-faults/--no-store-faults",
    default=True,
    show_default=True,
    help="saves of the gateway's own work that fail once with a transient store error",
)
@click.option(
    "--scopes/--no-scopes",
    default=True,
    show_default=True,
    help="a visibility scope per seed (self|tree|agent|all) and list/history reads",
)
@click.option(
    "--schedules/--no-schedules",
    default=True,
    show_default=True,
    help="an interval schedule in each seed's config (decision 36), removed at the drain",
)
@click.option(
    "--forks/--no-forks",
    default=True,
    show_default=True,
    help="a fork of a session in place of a step, in some seeds (decision 34)",
)
@click.option(
    "--inputs/--no-inputs",
    default=True,
    show_default=True,
    help="turns that ask for input and answers: late, early, twice, around crashes, "
    "after the deadline (decision 33)",
)
@click.option(
    "--stall-seconds",
    default=60.0,
    show_default=True,
    type=click.FloatRange(min=0, min_open=True),
    help="a seed that makes no progress this long (real time) is stopped: a liveness failure",
)
@click.option(
    "--seed-budget",
    default=900.0,
    show_default=True,
    type=click.FloatRange(min=0, min_open=True),
    help="last resort: a seed still playing after this long (real time) fails the run",
)
@click.option("--list-invariants", is_flag=True, help="list the invariants and exit")
@pass_options
def simulate(
    options: CliOptions,
    seeds: int,
    start: int,
    store_spec: str,
    steps: int,
    skip: tuple[str, ...],
    replay: Path | None,
    save_dir: Path | None,
    shrink: bool,
    first_failure: bool,
    two_gateways: bool,
    stale_owners: bool,
    dropped_connections: bool,
    budgets: bool,
    steers: bool,
    nested_spawns: bool,
    store_faults: bool,
    scopes: bool,
    schedules: bool,
    forks: bool,
    inputs: bool,
    stall_seconds: float,
    seed_budget: float,
    list_invariants: bool,
) -> int:
    """Play seeded random workloads and check the gateway's invariants.

    Each seed makes a script (messages, sends, nested sends and cycles, spawns, failing
    and hanging agents, failing channels, policy changes, clock jumps, crashes) played
    on a VirtualClock against a fresh store. The first failing seed is shrunk to a
    minimal script, printed and replayable with --replay FILE.
    """
    from sessionwire.adapters.testkit.simulator import (
        INVARIANTS,
        Simulation,
        SimulationScript,
        SimulationScriptError,
        StoreSpecError,
        WorkloadOptions,
        fresh_stores,
    )

    if list_invariants:
        for invariant in INVARIANTS.values():
            click.echo(f"{invariant.name}: {invariant.promise}")
        return EXIT_OK
    if options.store_given:
        # Each seed gets a fresh store of its own: the global --store names a store to
        # keep, which a simulation never opens. Silently running on memory hid that.
        fail(
            f"simulate plays each seed on a fresh store and never opens --store "
            f"{options.store}; choose the kind of store after the command: "
            "simulate --store memory|sqlite|sqlite:///DIR|postgres|postgresql://URL",
            EXIT_USAGE,
        )
    if not options.verbose:
        # A simulation makes agents and channels fail on purpose: their warnings are noise.
        logging.getLogger("sessionwire").setLevel(logging.CRITICAL)
    try:
        stores = fresh_stores(store_spec)
        simulation = Simulation(stores, skip=skip, stall_seconds=stall_seconds)
        script = SimulationScript.load(replay) if replay is not None else None
    except (StoreSpecError, SimulationScriptError, ValueError) as error:
        fail(str(error), EXIT_USAGE)
    try:
        if script is not None:
            return _replay(options, simulation, script)
        return asyncio.run(
            _seeds(
                options,
                simulation,
                stores,
                seeds,
                start,
                WorkloadOptions(
                    steps=steps,
                    crashes=stores.can_reopen,
                    two_gateways=two_gateways,
                    stale_owners=stale_owners,
                    dropped_connections=dropped_connections,
                    budgets=budgets,
                    steers=steers,
                    nested_spawns=nested_spawns,
                    store_faults=store_faults,
                    scopes=scopes,
                    schedules=schedules,
                    forks=forks,
                    inputs=inputs,
                ),
                save_dir,
                shrink,
                seed_budget,
                first_failure,
            )
        )
    finally:
        stores.close()


def _replay(options: CliOptions, simulation: Simulation, script: SimulationScript) -> int:
    result = simulation.run_sync(script)
    if options.as_json:
        click.echo(json.dumps(result.to_json()))
    else:
        click.echo(
            f"replayed seed {script.seed}: {len(script.steps)} steps, {result.events} events, "
            f"{result.seconds:.2f}s on {result.store}"
        )
        _print_violations(result)
    return EXIT_OK if result.ok else EXIT_REFUSED


async def _seeds(
    options: CliOptions,
    simulation: Simulation,
    stores: FreshStores,
    seeds: int,
    start: int,
    workload: WorkloadOptions,
    save_dir: Path | None,
    shrink: bool,
    seed_budget: float,
    first_failure: bool = False,
) -> int:
    from sessionwire.adapters.testkit.simulator import generate
    from sessionwire.adapters.testkit.simulator import shrink as shrink_script
    from sessionwire.adapters.testkit.simulator.shrinking import NotReproduced

    started = time.perf_counter()
    failures: list[SimulationResult] = []
    broken: Counter[str] = Counter()
    unchecked: set[str] = set()
    total_steps = total_events = crashes = 0
    simulated = 0.0  # seconds spent playing seeds (not shrinking)
    shrunk_json: dict[str, Any] | None = None
    for seed in range(start, start + seeds):
        script = generate(seed, workload)
        guard = threading.Timer(seed_budget, _over_budget, (options, script, seed_budget, save_dir))
        guard.daemon = True
        guard.start()
        try:
            result = await simulation.run(script)
        finally:
            guard.cancel()
        total_steps += result.steps
        total_events += result.events
        simulated += result.seconds
        unchecked.update(result.unchecked)
        crashes += result.crashes
        if not result.ok:
            failures.append(result)
            broken.update(result.counts.keys())
            if not options.as_json:
                click.echo(f"seed {seed}: FAILED ({', '.join(result.counts)})")
                _print_violations(result)
            if result.stuck is not None and len(failures) == 1:
                # Not shrunk: every try that hangs costs the stall budget; kept whole.
                path = _save(script, save_dir, seed)
                shrunk_json = {
                    "seed": seed,
                    "invariant": "liveness",
                    "reproduced": True,
                    "steps": len(script.steps),
                    "script": json.loads(script.to_json()),
                }
                if not options.as_json:
                    where = f": {path}" if path is not None else " (save it with --save DIR)"
                    click.echo(f"seed {seed} hung; not shrunk, its whole script{where}")
            elif shrink and len(failures) == 1:
                try:
                    shrunk = await shrink_script(simulation, script)
                except NotReproduced:
                    # Kept whole, to be played again: it failed once, not every time.
                    shrunk_json = {
                        "seed": seed,
                        "invariant": None,
                        "reproduced": False,
                        "steps": len(script.steps),
                        "script": json.loads(script.to_json()),
                    }
                    path = None
                    if save_dir is not None:
                        save_dir.mkdir(parents=True, exist_ok=True)
                        path = save_dir / f"seed-{seed}.json"
                        script.save(path)
                    if not options.as_json:
                        where = f"; its whole script: {path}" if path is not None else ""
                        click.echo(
                            f"seed {seed} broke no invariant when played again (the failure "
                            f"depends on timing, not on the script alone){where}"
                        )
                else:
                    shrunk_json = {
                        "seed": seed,
                        "invariant": shrunk.invariant,
                        "steps": len(shrunk.script.steps),
                        "tries": shrunk.tries,
                        "script": json.loads(shrunk.script.to_json()),
                    }
                    path = None
                    if save_dir is not None:
                        save_dir.mkdir(parents=True, exist_ok=True)
                        path = save_dir / f"seed-{seed}.json"
                        shrunk.script.save(path)
                    if not options.as_json:
                        _print_shrunk(shrunk.script, shrunk.invariant, shrunk.tries, path)
        done = seed - start + 1
        if failures and first_failure:
            seeds = done
            break
        if not options.as_json and (done % 100 == 0 or done == seeds):
            elapsed = time.perf_counter() - started
            click.echo(f"{done}/{seeds} seeds, {len(failures)} failed, {elapsed:.1f}s", err=True)
    elapsed = time.perf_counter() - started
    summary = {
        "store": stores.name,
        "seeds": seeds,
        "start": start,
        "steps": total_steps,
        "events": total_events,
        "crashes": crashes,
        "seconds": round(elapsed, 2),
        "simulatedSeconds": round(simulated, 2),
        "failed": [result.seed for result in failures],
        "broken": dict(broken),
        "shrunk": shrunk_json,
        "unchecked": sorted(unchecked),
        "crashesSkipped": not stores.can_reopen,
    }
    if options.as_json:
        click.echo(json.dumps(summary))
    else:
        per_seed = simulated / seeds if seeds else 0.0
        click.echo(
            f"{seeds} seeds ({start}..{start + seeds - 1}) on {stores.name}: {total_steps} "
            f"steps, {total_events} events, {crashes} crashes, {elapsed:.1f}s "
            f"({per_seed * 1000:.0f} ms a seed, shrinking aside); {len(failures)} failed"
            + _broken_text(broken)
        )
        if unchecked:
            click.echo(f"not checked (the gateway gave no way to): {', '.join(sorted(unchecked))}")
        if not stores.can_reopen:
            click.echo(
                f"crashes skipped: {stores.name} cannot reopen a store (--store sqlite plays them)"
            )
    return EXIT_REFUSED if failures else EXIT_OK


def _save(script: SimulationScript, save_dir: Path | None, seed: int) -> Path | None:
    if save_dir is None:
        return None
    save_dir.mkdir(parents=True, exist_ok=True)
    path = save_dir / f"seed-{seed}.json"
    script.save(path)
    return path


def _over_budget(
    options: CliOptions, script: SimulationScript, budget: float, save_dir: Path | None
) -> None:
    """The last resort (a watchdog thread): the seed is still playing after its real-time
    budget, stuck where the progress watchdog on the loop cannot see (the loop itself
    blocked). Reported as a failure with its script, and the process ends."""
    path = _save(script, save_dir, script.seed)
    detail = (
        f"seed {script.seed}: FAILED (liveness): still playing after {budget:g}s of real "
        "time (the event loop blocked?)"
    )
    if options.as_json:
        click.echo(json.dumps({"seed": script.seed, "failed": [script.seed], "stuck": detail}))
    else:
        click.echo(detail)
        click.echo(f"its script: {path}" if path else script.to_json())
    sys.stdout.flush()
    os._exit(EXIT_REFUSED)


def _broken_text(broken: Counter[str]) -> str:
    return ": " + ", ".join(f"{name} x{count}" for name, count in broken.items()) if broken else ""


def _print_violations(result: SimulationResult) -> None:
    for violation in result.violations:
        click.echo(f"  {violation}")
    hidden = sum(result.counts.values()) - len(result.violations)
    if hidden > 0:
        click.echo(f"  (and {hidden} more like these)")


def _print_shrunk(script: SimulationScript, invariant: str, tries: int, path: Path | None) -> None:
    click.echo(
        f"minimal reproduction of [{invariant}] (seed {script.seed}, "
        f"{len(script.steps)} steps, shrunk in {tries} runs):"
    )
    for index, step in enumerate(script.steps):
        click.echo(f"  {index}: {step.model_dump_json()}")
    if path is not None:
        click.echo(f"saved to {path}; replay: sessionwire simulate --replay {path}")
    else:
        click.echo("save it with --save DIR, then replay: sessionwire simulate --replay FILE")


__all__ = ["simulate"]

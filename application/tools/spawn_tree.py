"""A session's spawn tree: the sub-agent sessions it spawned, transitively, and their
runs — what ``subagents`` and ``session_status`` show, and all that they may touch.

Read whole on a reader thread of the store (decision 23). Only the caller's own tree is
read, so another session's children are never found: a target outside the tree gets
the same answer as one that does not exist.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any
from uuid import UUID

from sessionwire.application.ports.run_read_model import RunQuery, StoredRun
from sessionwire.application.ports.session_read_model import SessionQuery, StoredSession
from sessionwire.application.ports.store import Store
from sessionwire.domain.run import Run, RunState

# Children read per session, runs read per child session, and how deep the walk goes
# (maxSpawnDepth is at most 5; a deeper tree is cut, never walked forever).
MAX_CHILDREN = 200
MAX_CHILD_RUNS = 200
MAX_DEPTH = 8
TASK_SNIP = 200


@dataclass(frozen=True)
class TreeRun:
    """One run in a child session of the tree, with where the child sits."""

    run: StoredRun
    session: StoredSession
    depth: int
    parent_key: str
    task: str | None
    steers: int

    def row(self) -> dict[str, Any]:
        run = self.run
        runtime = (
            run.ended_at - run.started_at
            if run.ended_at is not None and run.started_at is not None
            else None
        )
        return {
            "runId": run.run_id,
            "sessionKey": self.session.state.key,
            "parentSessionKey": self.parent_key,
            "depth": self.depth,
            "label": self.session.state.label,
            "task": _snip(self.task),
            "step": run.step,
            "status": run.status,
            "startedAt": run.started_at,
            "endedAt": run.ended_at,
            "runtimeMs": runtime,
            "model": run.model,
            "usage": run.usage,
            "steers": self.steers,
        }


@dataclass
class SpawnTree:
    root_key: str
    sessions: list[tuple[StoredSession, int, str]] = field(default_factory=list)
    """(child session, depth from the root, the key of the session that spawned it)."""
    runs: list[TreeRun] = field(default_factory=list)
    """Every run of every child session, newest first."""

    def spawn_runs(self) -> list[TreeRun]:
        """The runs the spawns started (one per child), newest first."""
        return [entry for entry in self.runs if entry.run.step == "subagent_task"]

    def find(self, target: str) -> list[TreeRun]:
        """The runs ``target`` names in the tree: a run id, or a child session by key or
        label (its run in flight, else its spawn's run). Empty: nothing in the tree."""
        wanted = target.strip()
        by_id = [entry for entry in self.runs if entry.run.run_id == wanted.lower()]
        if by_id:
            return by_id
        for session, _, _ in self.sessions:
            state = session.state
            if wanted not in {state.key, state.session_id} and wanted != state.label:
                continue
            mine = [entry for entry in self.runs if entry.session.state.key == state.key]
            live = [entry for entry in mine if not entry.run.ended]
            if live:
                return live[-1:]  # the oldest in flight: the one running (or next to)
            spawned = [entry for entry in mine if entry.run.step == "subagent_task"]
            return spawned[:1]
        return []


def read_tree(store: Store, root_key: str) -> SpawnTree:
    """On a reader thread: the tree under ``root_key``, breadth first."""
    tree = SpawnTree(root_key=root_key)
    seen = {root_key}
    frontier = [(root_key, 0)]
    while frontier:
        parent, depth = frontier.pop(0)
        if depth >= MAX_DEPTH:
            continue
        for child in store.list_sessions(SessionQuery(limit=MAX_CHILDREN, spawned_by=parent)):
            key = child.state.key
            if key in seen:
                continue
            seen.add(key)
            tree.sessions.append((child, depth + 1, parent))
            frontier.append((key, depth + 1))
    for child, depth, parent in tree.sessions:
        for run in store.list_runs(RunQuery(limit=MAX_CHILD_RUNS, session_key=child.state.key)):
            state = _run_state(store, run.run_id)
            tree.runs.append(
                TreeRun(
                    run=run,
                    session=child,
                    depth=depth,
                    parent_key=parent,
                    task=state.message if state and run.step == "subagent_task" else None,
                    steers=state.steers if state else 0,
                )
            )
    tree.runs.sort(key=lambda entry: (entry.run.created_at, entry.run.run_id), reverse=True)
    return tree


def _run_state(store: Store, run_id: str) -> RunState | None:
    stored = store.work(UUID(run_id))
    return None if stored is None else stored.to_aggregate(Run, RunState).state


def _snip(text: str | None) -> str | None:
    if text is None or len(text) <= TASK_SNIP:
        return text
    return text[: TASK_SNIP - 1] + "…"

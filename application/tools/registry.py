"""The gateway's tools, each declared once (issue 37, ADR 0037 amended, ADR 0043).

An entry holds all that any table says of a tool: its name and description, its
parameters' model (its JSON Schema is generated from it, ``schemas.py``), its handler
and result models, its MCP hints, what a sub-agent may do with it, and the surfaces it
is served on. Every other table derives from ``REGISTRY``: the tools ``call_tool``
answers (``GatewayService``, and ``ReadTools`` for the ``reader`` ones), the HTTP routes
``POST /v1/tools/<name>`` and their response models, MCP's ``tools/list`` and its hints,
the tools a run is offered and a sub-agent's share of them, the metrics' tool label.

Parameter models, handlers and result models are named by topic (``module:attribute``)
and imported on first use, as the store's backends are (ADR 0037 §1): a process that only
reads loads neither the tools that start runs nor their parameters or result models (ADR
0036; issue 38 item 7: a listing builds the reading tools' parameters only).
"""

from __future__ import annotations

import importlib
from collections.abc import Awaitable, Callable, Iterator, Mapping
from dataclasses import dataclass, field
from functools import cached_property, reduce
from operator import or_
from typing import TYPE_CHECKING, Any, Literal

from sessionwire.application.context import ToolContext
from sessionwire.application.tools.results import ReadAnswer, ToolError, ToolResult
from sessionwire.domain.subagents import OPENCLAW_SUBAGENT_DENIED, OPENCLAW_TOOLS, ToolCatalogue

if TYPE_CHECKING:
    from sessionwire.application.tools.params import ToolParams

ToolAnswer = ToolResult | ReadAnswer
ToolHandler = Callable[[ToolContext, Any], ToolAnswer | Awaitable[ToolAnswer]]
ToolEntry = tuple[type["ToolParams"], ToolHandler]

# Where a tool is served besides ``call_tool`` (the Python API, which answers every
# registered tool): ``http`` its route and its row of ``GET /v1/tools``, ``mcp`` its row of
# ``tools/list``, ``runs`` the tools a run is offered (``RunRequest.tools``), ``reader``
# the read path without a gateway (``ReadTools``: the CLI's reads, ADR 0036).
Surface = Literal["http", "mcp", "runs", "reader"]
SERVED: frozenset[Surface] = frozenset({"http", "mcp", "runs"})

# What a sub-agent may do with a tool: never (``denied``), always (``allowed``, unless
# the config denies it), or only while it may nest (``orchestrator``, decision 30).
SubagentAccess = Literal["denied", "allowed", "orchestrator"]

TOOLS_PACKAGE = "sessionwire.application.tools"


@dataclass(frozen=True)
class ToolHints:
    """MCP's tool annotations, for hosts deciding what to confirm with a user."""

    read_only: bool
    destructive: bool
    idempotent: bool
    open_world: bool


# The reading tools change nothing; the others start or steer agent runs, whose
# announces may reach a chat.
READS = ToolHints(read_only=True, destructive=False, idempotent=True, open_world=False)
ACTS = ToolHints(read_only=False, destructive=False, idempotent=False, open_world=True)
# Acts and can undo work (cancels runs and what they caused): a host should confirm it.
CANCELS = ToolHints(read_only=False, destructive=True, idempotent=False, open_world=True)


def resolve(topic: str) -> Any:
    """The attribute a ``module:attribute`` topic names, its module imported."""
    module, _, attribute = topic.partition(":")
    return getattr(importlib.import_module(module), attribute)


@dataclass(frozen=True)
class ToolSpec:
    """One tool. ``params`` is its parameters' model, or that model's topic (imported at
    the first ``params_model``, which checks it is this tool's). ``handler`` is a topic,
    by default the function named for the tool in the module named for it
    (``application/tools/<name>.py``); it is called with the tool's context and its
    parsed parameters. ``results`` are the topics of the models its answer may be (a
    ``ToolError`` besides)."""

    name: str
    description: str
    params: type[ToolParams] | str
    results: tuple[str, ...]
    hints: ToolHints
    subagents: SubagentAccess
    surfaces: frozenset[Surface] = SERVED
    handler: str = ""

    def __post_init__(self) -> None:
        if not isinstance(self.params, str):
            self._check(self.params)
        if not self.handler:
            object.__setattr__(self, "handler", f"{TOOLS_PACKAGE}.{self.name}:{self.name}")

    def _check(self, params: type[ToolParams]) -> type[ToolParams]:
        if params.tool != self.name:
            raise ValueError(f"{self.name}: its parameters are {params.tool}'s")
        return params

    @cached_property
    def params_model(self) -> type[ToolParams]:
        """Its parameters' model, its module imported (built) on first use."""
        params = self.params
        return self._check(resolve(params) if isinstance(params, str) else params)

    def entry(self) -> ToolEntry:
        """Its parameters' model and its handler, their modules imported."""
        return self.params_model, resolve(self.handler)

    def result_model(self) -> Any:
        """The union of the models its answer may be (HTTP's response model)."""
        return reduce(or_, [*(resolve(topic) for topic in self.results), ToolError])


@dataclass(frozen=True)
class ToolRegistry:
    specs: tuple[ToolSpec, ...]
    by_name: dict[str, ToolSpec] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        by_name = {spec.name: spec for spec in self.specs}
        if len(by_name) != len(self.specs):
            raise ValueError("a tool is registered twice")
        object.__setattr__(self, "by_name", by_name)

    def __iter__(self) -> Iterator[ToolSpec]:
        return iter(self.specs)

    def __getitem__(self, name: str) -> ToolSpec:
        return self.by_name[name]

    def __contains__(self, name: object) -> bool:
        # Any value: a caller's made-up tool name may be a list or a dict.
        return isinstance(name, str) and name in self.by_name

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(self.by_name)

    def on(self, surface: Surface) -> tuple[ToolSpec, ...]:
        """The tools served on ``surface``, in registry order."""
        return tuple(spec for spec in self.specs if surface in spec.surfaces)

    def entries(self, surface: Surface | None = None) -> dict[str, ToolEntry]:
        """What ``call_tool`` answers: every tool (or ``surface``'s), handlers imported."""
        specs = self.specs if surface is None else self.on(surface)
        return {spec.name: spec.entry() for spec in specs}

    def entries_on_use(self, surface: Surface) -> Mapping[str, ToolEntry]:
        """``entries(surface)`` with each handler's module imported at its tool's first
        lookup: the read path's (ADR 0036), where a listing need not load the history's
        fork reads, the search or the agents' list (issue 38 item 7)."""
        return EntriesOnUse({spec.name: spec for spec in self.on(surface)})

    @cached_property
    def catalogue(self) -> ToolCatalogue:
        """The tools a run is offered (OpenClaw's others, then the gateway's) and a
        sub-agent's rules over them (``domain/subagents.py``)."""
        offered = self.on("runs")
        return ToolCatalogue(
            known=(*OPENCLAW_TOOLS, *(spec.name for spec in offered)),
            denied=(
                *OPENCLAW_SUBAGENT_DENIED,
                *(spec.name for spec in offered if spec.subagents != "allowed"),
            ),
            orchestrator=tuple(spec.name for spec in offered if spec.subagents == "orchestrator"),
        )


class EntriesOnUse(Mapping[str, ToolEntry]):
    """Tool entries by name, each resolved (its handler's module imported) when first
    looked up, then kept."""

    def __init__(self, specs: dict[str, ToolSpec]) -> None:
        self.specs = specs
        self.resolved: dict[str, ToolEntry] = {}

    def __getitem__(self, name: str) -> ToolEntry:
        entry = self.resolved.get(name)
        if entry is None:
            entry = self.resolved[name] = self.specs[name].entry()
        return entry

    def __iter__(self) -> Iterator[str]:
        return iter(self.specs)

    def __len__(self) -> int:
        return len(self.specs)


READ_PARAMS = f"{TOOLS_PACKAGE}.params"
RUN_PARAMS = f"{TOOLS_PACKAGE}.run_params"
READ_MODELS = f"{TOOLS_PACKAGE}.read_result_models"
RUN_RESULTS = f"{TOOLS_PACKAGE}.run_results"
# A send or a spawn the trace's budget refuses answers so (decision 31).
BUDGET_REFUSED = f"{RUN_RESULTS}:TraceBudgetRefused"

REGISTRY = ToolRegistry(
    (
        ToolSpec(
            name="sessions_list",
            description="List sessions with optional filters and last messages.",
            params=f"{READ_PARAMS}:SessionsListParams",
            results=(f"{READ_MODELS}:SessionsListResult",),
            hints=READS,
            subagents="denied",
            surfaces=SERVED | {"reader"},
        ),
        ToolSpec(
            name="sessions_history",
            description="Fetch message history for a session.",
            params=f"{READ_PARAMS}:SessionsHistoryParams",
            results=(f"{READ_MODELS}:SessionsHistoryResult",),
            hints=READS,
            subagents="denied",
            surfaces=SERVED | {"reader"},
        ),
        ToolSpec(
            name="sessions_search",
            description=(
                "Search the transcripts of the sessions you may see for messages holding "
                "every word of a query; newest first, with a snippet of each."
            ),
            params=f"{READ_PARAMS}:SessionsSearchParams",
            results=(f"{READ_MODELS}:SessionsSearchResult",),
            hints=READS,
            subagents="denied",
            surfaces=SERVED | {"reader"},
        ),
        ToolSpec(
            name="sessions_send",
            description=(
                "Send a message into another session. Use sessionKey or label to identify "
                "the target."
            ),
            params=f"{RUN_PARAMS}:SessionsSendParams",
            results=(f"{RUN_RESULTS}:SendResult", BUDGET_REFUSED),
            hints=ACTS,
            subagents="denied",
        ),
        ToolSpec(
            name="sessions_spawn",
            description=(
                "Spawn a background sub-agent run in an isolated session and announce the "
                "result back to the requester chat."
            ),
            params=f"{RUN_PARAMS}:SessionsSpawnParams",
            results=(f"{RUN_RESULTS}:SpawnResult", BUDGET_REFUSED),
            hints=ACTS,
            # A sub-agent that may nest (maxSpawnDepth above its depth) gets it back.
            subagents="orchestrator",
        ),
        ToolSpec(
            name="sessions_yield",
            description=(
                "End your turn and wait for your sub-agents: you are woken by a new turn "
                "with their reports when all (or any) have finished, or when the wait "
                "times out."
            ),
            params=f"{RUN_PARAMS}:SessionsYieldParams",
            results=(f"{RUN_RESULTS}:YieldResult",),
            hints=ACTS,
            # A sub-agent may pause for its own children.
            subagents="allowed",
        ),
        ToolSpec(
            name="agents_list",
            description=(
                "List agent ids you can target with sessions_spawn (based on allowlists)."
            ),
            params=f"{READ_PARAMS}:AgentsListParams",
            results=(f"{TOOLS_PACKAGE}.results:AgentsListResult",),
            hints=READS,
            subagents="denied",
            surfaces=SERVED | {"reader"},
        ),
        ToolSpec(
            name="subagents",
            description=(
                "List, cancel or steer the sub-agent runs this session spawned (its own "
                "spawn tree)."
            ),
            params=f"{RUN_PARAMS}:SubagentsParams",
            results=(f"{RUN_RESULTS}:SubagentsResult",),
            hints=CANCELS,
            # A leaf sub-agent has no children to control (OpenClaw gives `subagents` to
            # orchestrator sub-agents only, with nesting on).
            subagents="denied",
        ),
        ToolSpec(
            name="session_status",
            description=(
                "Show this session's status: its run in flight, its sub-agents, usage and budget."
            ),
            params=f"{RUN_PARAMS}:SessionStatusParams",
            results=(f"{RUN_RESULTS}:SessionStatusResult",),
            hints=READS,
            subagents="denied",
        ),
        ToolSpec(
            name="run_input",
            description=(
                "Answer a run that waits for input (its turn asked a question): the run "
                "resumes with your answer as its next message."
            ),
            params=f"{RUN_PARAMS}:RunInputParams",
            results=(f"{TOOLS_PACKAGE}.run_input:RunInputResult",),
            hints=ACTS,
            subagents="denied",
            # For people and their clients (the Python API, HTTP, MCP), not offered to runs.
            surfaces=frozenset({"http", "mcp"}),
        ),
    )
)

"""How one tool call is answered, by the gateway and by the read path alike.

The tool looked up, the requester's key made canonical, a sub-agent's tools gated, the
parameters parsed, the tool run, and every refusal or failure turned into the answer the
caller gets (a call never raises). ``GatewayService.call_tool`` and ``ReadTools`` (the
CLI's ``sessions list``/``history`` and ``agents list``, ADR 0036) both answer through
here, so the requester and visibility rules are one code path.

The read tools are the registry's ``reader`` tools (``tools/registry.py``), their
handlers imported apart from the tools that start runs: a process that only reads never
loads the orchestration drivers or the run, exchange, spawn and outbox aggregates.
"""

from __future__ import annotations

import inspect
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from sessionwire.application.config.gateway_config import GatewayConfig
from sessionwire.application.context import Requester, ToolContext
from sessionwire.application.ports.async_store import AsyncStore
from sessionwire.application.ports.store import StoreDamaged, StoreInUse
from sessionwire.application.tools.params import ToolInputError
from sessionwire.application.tools.registry import REGISTRY, ToolEntry
from sessionwire.application.tools.results import ToolError
from sessionwire.application.tools.session_refs import SessionNotResolved, SessionRefused
from sessionwire.domain.keys import InvalidSessionKey, KeyRules, is_subagent_key
from sessionwire.domain.policy import subagent_tool_refusal
from sessionwire.domain.subagents import subagent_tools

# The tools answered without a gateway (the registry's ``reader`` ones), each handler
# imported by its first call: ``sessions list`` loads neither the history's fork reads
# (and the audit state under them) nor the search.
READ_TOOLS: Mapping[str, ToolEntry] = REGISTRY.entries_on_use("reader")

# What a tool call answers while another gateway is the store's one writer: no path,
# host or pid of the operator's machine (issue 27 finding 8).
STORE_HELD = (
    "the store is held by another gateway (one writer per SQLite file): nothing was "
    "written; call the gateway that serves this store"
)


def shorten(text: str, limit: int = 80) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


class ToolAccess:
    """Which tools a session may call: every tool, but a sub-agent only its own set (and
    ``sessions_spawn`` too while it may nest, decision 30)."""

    def __init__(self, config: GatewayConfig, store: AsyncStore) -> None:
        self.store = store
        subagent_policy = config.tools.subagents.tools
        self.catalogue = REGISTRY.catalogue
        self.subagent_tools = subagent_tools(
            self.catalogue, subagent_policy.allow, subagent_policy.deny
        )
        # A sub-agent above maxSpawnDepth's last level spawns children of its own
        # (decision 30): it gets sessions_spawn too.
        self.orchestrator_tools = subagent_tools(
            self.catalogue, subagent_policy.allow, subagent_policy.deny, orchestrator=True
        )
        self.max_spawn_depth = config.agents.defaults.subagents.maxSpawnDepth

    async def of_session(self, key: str) -> tuple[str, ...]:
        if not is_subagent_key(key):
            return self.catalogue.known
        if self.max_spawn_depth > 1:
            # Imported here: only a sub-agent's call reads its spawn's depth, and a
            # top-level reader's listing never loads the spawn aggregate.
            from sessionwire.application.orchestration.spawn_depth import spawn_depth

            if await spawn_depth(self.store, key) < self.max_spawn_depth:
                return self.orchestrator_tools
        return self.subagent_tools


@dataclass(frozen=True)
class ToolCall:
    """A call to a known tool from a well-formed requester, before it runs."""

    name: str
    entry: ToolEntry
    caller: Requester


def tool_call(
    tools: Mapping[str, ToolEntry], rules: KeyRules, requester: str, name: Any
) -> ToolCall | dict[str, Any]:
    """The call to answer, or the error answer for an unknown tool or a malformed
    requester key."""
    entry = tools.get(name) if isinstance(name, str) else None
    if entry is None:
        known = ", ".join(tools)
        name = shorten(str(name))
        return ToolError(
            tool=str(name), error=f"unknown tool {name!r} (tools: {known})"
        ).to_json_dict()
    try:
        caller = Requester.from_key(rules, requester)
    except InvalidSessionKey as error:
        return ToolError(tool=name, error=f"invalid requester session: {error}").to_json_dict()
    return ToolCall(name=name, entry=entry, caller=caller)


async def answer(
    call: ToolCall, context: ToolContext, params: Any, *, access: ToolAccess, log: Any
) -> dict[str, Any]:
    """Run ``call`` in ``context``: a sub-agent's tool it may not use and a refusal by
    policy are recorded as evidence; every refusal or failure is an error answer."""
    name = call.name
    if is_subagent_key(call.caller.key) and name not in await access.of_session(call.caller.key):
        refusal = subagent_tool_refusal(name)
        log.info("tool forbidden to a sub-agent")
        await context.record_refusal(refusal, tool=name, reference=name, target_key=None)
        return ToolError(status="forbidden", tool=name, error=refusal.message).to_json_dict()
    params_class, handler = call.entry
    try:
        parsed = params_class.parse(params)
        outcome = handler(context, parsed)
        result = await outcome if inspect.isawaitable(outcome) else outcome
    except (ToolInputError, SessionNotResolved) as error:
        message = error.message if isinstance(error, SessionNotResolved) else str(error)
        log.info("tool refused", error=message)
        return ToolError(tool=name, error=message).to_json_dict()
    except SessionRefused as refused:
        refusal = refused.refusal
        log.info("tool refused by policy", error=refusal.message, rule=refusal.rule)
        await context.record_refusal(
            refusal, tool=name, reference=refused.reference, target_key=refused.target_key
        )
        return ToolError(status=refusal.status, tool=name, error=refusal.message).to_json_dict()
    except StoreInUse as held:
        # Beside an SQLite file's live writer (decision 20). Its message names the
        # file's path, host and pid: the operator's log has them, the agent does not.
        log.warning("tool refused: the store has another writer", error=str(held))
        return ToolError(tool=name, error=STORE_HELD).to_json_dict()
    except StoreDamaged:
        # Not this call's failure but the store's: no tool can answer from it; the
        # server or command refuses in one line (docs/security.md).
        raise
    except Exception as error:  # a tool call must answer, whatever broke inside
        # The exception's text may name paths, hosts or processes: the log has it,
        # the caller (an agent, perhaps hostile) gets its type only.
        log.exception("tool failed")
        return ToolError(tool=name, error=f"internal error: {type(error).__name__}").to_json_dict()
    return result.to_json_dict()

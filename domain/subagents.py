"""What a sub-agent may do and what it is told (openclaw-behaviour.md §8.4)."""

from __future__ import annotations

import fnmatch
from collections.abc import Iterable
from dataclasses import dataclass

# OpenClaw's tools that are not the gateway's: a run can be offered them, its runtime
# implements them (runtimes may know more, named in the config). The gateway's own tools
# are its tool registry's (application/tools/registry.py), which builds the catalogue.
OPENCLAW_TOOLS = (
    "exec",
    "process",
    "read",
    "write",
    "edit",
    "apply_patch",
    "image",
    "browser",
    "web_search",
    "web_fetch",
    "message",
    "gateway",
    "cron",
    "memory_search",
    "memory_get",
    "whatsapp_login",
)

# Of those, always denied to sub-agents, whatever the config allows (OpenClaw's deny
# list; the gateway's tools it denies are marked so in the registry).
OPENCLAW_SUBAGENT_DENIED = ("gateway", "whatsapp_login", "cron", "memory_search", "memory_get")


@dataclass(frozen=True)
class ToolCatalogue:
    """The tool names a run can be offered, in the order offered, and which of them a
    sub-agent never gets (``denied``) but while it may nest (``orchestrator``, decision
    30: ``sessions_spawn``)."""

    known: tuple[str, ...]
    denied: tuple[str, ...]
    orchestrator: tuple[str, ...]


def _matches(name: str, patterns: Iterable[str]) -> bool:
    return any(
        fnmatch.fnmatchcase(name, pattern.strip()) for pattern in patterns if pattern.strip()
    )


def subagent_tools(
    catalogue: ToolCatalogue,
    allow: list[str] | None,
    deny: list[str],
    *,
    orchestrator: bool = False,
) -> tuple[str, ...]:
    """The tools a sub-agent run may use: the catalogue minus the tools it denies
    sub-agents (the session tools but ``sessions_yield``: a sub-agent may pause for its
    own children), but the orchestrator's tools for an ``orchestrator``.

    ``tools.subagents.tools.allow``, when set, makes the policy allow-only;
    ``...deny`` adds to the built-in deny list, which always wins.
    """
    built_in = [
        name for name in catalogue.denied if not (orchestrator and name in catalogue.orchestrator)
    ]
    denied = [*built_in, *deny]
    candidates = [*catalogue.known, *(a for a in (allow or []) if "*" not in a)]
    tools = []
    for name in dict.fromkeys(candidates):
        if _matches(name, denied):
            continue
        if allow is not None and not _matches(name, allow):
            continue
        tools.append(name)
    return tuple(tools)


def subagent_system_prompt(
    *,
    task: str,
    label: str | None,
    requester_key: str,
    requester_channel: str | None,
    child_key: str,
) -> str:
    task_line = " ".join(task.split()) or "{{TASK_DESCRIPTION}}"
    lines = [
        "# Subagent Context",
        "",
        "You are a **subagent** spawned by the main agent for a specific task.",
        "",
        "## Your Role",
        f"- You were created to handle: {task_line}",
        "- Complete this task. That's your entire purpose.",
        "- You are NOT the main agent. Don't try to be.",
        "",
        "## Rules",
        "1. **Stay focused** - Do your assigned task, nothing else",
        "2. **Complete the task** - Your final message will be automatically reported to "
        "the main agent",
        "3. **Don't initiate** - No heartbeats, no proactive actions, no side quests",
        "4. **Be ephemeral** - You may be terminated after task completion. That's fine.",
        "",
        "## Output Format",
        "When complete, your final response should include:",
        "- What you accomplished or found",
        "- Any relevant details the main agent should know",
        "- Keep it concise but informative",
        "",
        "## What You DON'T Do",
        "- NO user conversations (that's main agent's job)",
        "- NO external messages unless explicitly tasked",
        "- NO cron jobs or persistent state",
        "- NO pretending to be the main agent",
        "- NO using the `message` tool directly",
        "",
        "## Session Context",
    ]
    if label:
        lines.append(f"- Label: {label}")
    lines.append(f"- Requester session: {requester_key}.")
    if requester_channel:
        lines.append(f"- Requester channel: {requester_channel}.")
    lines.append(f"- Your session: {child_key}.")
    return "\n".join(lines)

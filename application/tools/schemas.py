"""JSON Schemas of the tools, for LLM function calling.

Numbers are typed ``number`` (never ``integer``) and no schema has a top-level
``anyOf``/``oneOf``: some model providers reject either (openclaw-conformance.md §A).
"""

from __future__ import annotations

from typing import Any

TOOL_DESCRIPTIONS = {
    "sessions_list": "List sessions with optional filters and last messages.",
    "sessions_history": "Fetch message history for a session.",
    "sessions_send": (
        "Send a message into another session. Use sessionKey or label to identify the target."
    ),
    "sessions_spawn": (
        "Spawn a background sub-agent run in an isolated session and announce the result "
        "back to the requester chat."
    ),
    "sessions_yield": (
        "End your turn and wait for your sub-agents: you are woken by a new turn with "
        "their reports when all (or any) have finished, or when the wait times out."
    ),
    "agents_list": "List agent ids you can target with sessions_spawn (based on allowlists).",
    "subagents": (
        "List, cancel or steer the sub-agent runs this session spawned (its own spawn tree)."
    ),
    "session_status": (
        "Show this session's status: its run in flight, its sub-agents, usage and budget."
    ),
}


def _object(properties: dict[str, Any], required: list[str] | None = None) -> dict[str, Any]:
    schema: dict[str, Any] = {
        "type": "object",
        "properties": properties,
        "additionalProperties": False,
    }
    if required:
        schema["required"] = required
    return schema


TOOL_PARAMETERS: dict[str, dict[str, Any]] = {
    "sessions_list": _object(
        {
            "kinds": {
                "type": "array",
                "items": {
                    "type": "string",
                    "enum": ["main", "group", "cron", "hook", "node", "other"],
                },
                "description": "Only sessions of these kinds.",
            },
            "limit": {
                "type": "number",
                "minimum": 1,
                "description": "Max rows (default 50, clamped to 200).",
            },
            "activeMinutes": {
                "type": "number",
                "minimum": 1,
                "description": "Only sessions updated within N minutes.",
            },
            "messageLimit": {
                "type": "number",
                "minimum": 0,
                "description": "Include the last N messages of each session (0-20, default 0).",
            },
            "label": {
                "type": "string",
                "maxLength": 64,
                "description": "Only sessions with exactly this label.",
            },
            "agentId": {
                "type": "string",
                "maxLength": 64,
                "description": "Only sessions of this agent.",
            },
            "search": {
                "type": "string",
                "description": (
                    "Only sessions whose key, sessionId, label or display name contains "
                    "this text (any case)."
                ),
            },
            "archived": {
                "type": "boolean",
                "description": "List archived sessions instead of active ones (default false).",
            },
        }
    ),
    "sessions_history": _object(
        {
            "sessionKey": {
                "type": "string",
                "description": "A session key or a sessionId from sessions_list.",
            },
            "limit": {
                "type": "number",
                "minimum": 1,
                "description": "Max messages (default 200, clamped to 1000).",
            },
            "offset": {
                "type": "number",
                "minimum": 0,
                "description": (
                    "Page back through older messages: skip this many of the newest "
                    "(0 = the newest page); pass the returned nextOffset for the next page."
                ),
            },
            "includeTools": {
                "type": "boolean",
                "description": "Include toolResult messages (default false).",
            },
        },
        required=["sessionKey"],
    ),
    "sessions_send": _object(
        {
            "sessionKey": {
                "type": "string",
                "description": "Target session key or sessionId (or use label).",
            },
            "label": {
                "type": "string",
                "maxLength": 64,
                "description": "Target session label (instead of sessionKey).",
            },
            "agentId": {
                "type": "string",
                "maxLength": 64,
                "description": (
                    "With label: the agent whose sessions the label is looked up in; "
                    "alone: that agent's main session."
                ),
            },
            "message": {"type": "string", "description": "The message to send."},
            "timeoutSeconds": {
                "type": "number",
                "minimum": 0,
                "description": "Seconds to wait for the reply (default 30; 0 = do not wait).",
            },
        },
        required=["message"],
    ),
    "sessions_spawn": _object(
        {
            "task": {"type": "string", "description": "What the sub-agent should do."},
            "label": {"type": "string", "maxLength": 64, "description": "For logs and UI."},
            "agentId": {
                "type": "string",
                "description": "Spawn under another agent id (see agents_list).",
            },
            "model": {"type": "string", "description": "Model for the sub-agent."},
            "thinking": {"type": "string", "description": "Thinking level for the sub-agent."},
            "runTimeoutSeconds": {
                "type": "number",
                "minimum": 0,
                "description": "Abort the sub-agent run after N seconds (0 = no limit).",
            },
            "timeoutSeconds": {
                "type": "number",
                "minimum": 0,
                "description": "Older name of runTimeoutSeconds.",
            },
            "cleanup": {
                "type": "string",
                "enum": ["keep", "delete"],
                "description": "Delete the child session after it reports (default keep).",
            },
        },
        required=["task"],
    ),
    "sessions_yield": _object(
        {
            "waitFor": {
                "type": "string",
                "enum": ["all", "any"],
                "description": "Wake when all sub-agents have finished (default) or any has.",
            },
            "timeoutSeconds": {
                "type": "number",
                "minimum": 1,
                "description": "Wake after N seconds at the latest (default: your run's "
                "own deadline).",
            },
            "message": {
                "type": "string",
                "description": "A private note the woken turn receives.",
            },
        }
    ),
    "agents_list": _object({}),
    "subagents": _object(
        {
            "action": {
                "type": "string",
                "enum": ["list", "cancel", "steer"],
                "description": "list (default), cancel (with what it caused) or steer.",
            },
            "target": {
                "type": "string",
                "description": (
                    "For cancel and steer: a runId from list, or a child sessionKey or "
                    'label; "all" cancels every sub-agent run in flight.'
                ),
            },
            "message": {
                "type": "string",
                "description": "For steer: what the running sub-agent reads at its next step.",
            },
            "reason": {"type": "string", "description": "For cancel: why (recorded)."},
            "recentMinutes": {
                "type": "number",
                "minimum": 1,
                "description": "For list: ended runs within N minutes (default 30).",
            },
        }
    ),
    "session_status": _object(
        {
            "sessionKey": {
                "type": "string",
                "description": 'Omit, or "current": this session (the only one it reports).',
            },
        }
    ),
}


def tool_schemas() -> list[dict[str, Any]]:
    return [
        {"name": name, "description": TOOL_DESCRIPTIONS[name], "parameters": parameters}
        for name, parameters in TOOL_PARAMETERS.items()
    ]

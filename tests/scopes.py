"""Configs for tests written before visibility scopes existed (contract decision 28).

Until then every session's tools could reach every session of its agent, and other
agents' as ``tools.agentToAgent`` allowed: what ``tools.sessions.visibility: "all"`` does
now. A test of those days that relies on it says so by wrapping its config here; the
scopes themselves are tested in tests/unit/test_visibility_policy.py and
tests/integration/test_security_matrix.py.
"""

from __future__ import annotations

from typing import Any


def before_scopes(config: dict[str, Any] | None = None, visibility: str = "all") -> dict[str, Any]:
    """``config`` with ``tools.sessions.visibility`` set (``all`` unless told)."""
    config = dict(config or {})
    tools = dict(config.get("tools") or {})
    tools["sessions"] = {**(tools.get("sessions") or {}), "visibility": visibility}
    config["tools"] = tools
    return config

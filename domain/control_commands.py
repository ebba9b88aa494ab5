"""The owner's ``/send on|off|inherit`` text command (openclaw-behaviour.md §7).

It must be the whole message: ``/send``, then optionally a colon and one alphabetic token.
``/send: on`` counts (the body is normalised first); ``send on`` and ``/send on please``
are ordinary messages.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

SendMode = Literal["allow", "deny", "inherit"]

SEND_USAGE = "⚙️ Usage: /send on|off|inherit"

# The token needs a space or a colon before it: "/sendon" is not the command.
_SEND_COMMAND = re.compile(r"^/send(?:(?:\s*:\s*|\s+)([A-Za-z]+))?\s*:?\s*$", re.IGNORECASE)
_MODES: dict[str, SendMode] = {
    "on": "allow",
    "allow": "allow",
    "off": "deny",
    "deny": "deny",
    "inherit": "inherit",
    "default": "inherit",
    "reset": "inherit",
}
_SHOWN = {"allow": "on", "deny": "off", "inherit": "inherit"}


@dataclass(frozen=True)
class SendCommand:
    mode: SendMode | None
    """None for ``/send`` alone or an unknown token: the owner gets the usage text."""

    @property
    def reply(self) -> str:
        if self.mode is None:
            return SEND_USAGE
        return f"⚙️ Send policy set to {_SHOWN[self.mode]}."

    @property
    def override(self) -> str | None:
        """The session's ``sendPolicy`` after the command (None clears it)."""
        return None if self.mode in (None, "inherit") else self.mode


def parse_send_command(text: str) -> SendCommand | None:
    """The command in ``text``, or None when the message is not a ``/send`` command."""
    match = _SEND_COMMAND.match(text.strip())
    if match is None:
        return None
    token = match.group(1)
    return SendCommand(mode=_MODES.get(token.lower()) if token else None)

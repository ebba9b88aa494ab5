"""Stored transcript lines as a reader gets them: ``sessions_history``, the messages of
``sessions_list`` and the console's transcript all read them through ``reader_messages``.

Each line is decoded, its user text cleaned of channel envelopes (as ``clean_for_reader``
does), given its provenance (as ``with_provenance`` does) and, when another session reads
it, masked by the redactor. Most lines hold no secret: when the redactor finds nothing in the stored
JSON text itself, masking could change nothing, and the walk over every message is
skipped (``_nothing_to_mask`` says why that is exact).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from functools import lru_cache
from typing import Any

from sessionwire.domain.causality import default_provenance_shown
from sessionwire.domain.redaction import Redactor
from sessionwire.domain.transcript import strip_envelope

# What a line recorded without provenance is given: not in the stored text.
_DEFAULT_PROVENANCE = (default_provenance_shown("user"), default_provenance_shown("assistant"))


def reader_messages(lines: Sequence[str], redactor: Redactor | None) -> list[dict[str, Any]]:
    """The stored JSON ``lines`` as readers get them, masked by ``redactor`` unless None."""
    return reader_view(lines, redactor)[0]


def reader_view(
    lines: Sequence[str], redactor: Redactor | None
) -> tuple[list[dict[str, Any]], bool]:
    """``reader_messages``, and whether masking changed any message (``sessions_history``
    says so: ``contentRedacted``)."""
    joined = ",".join(lines)
    if redactor is None or _nothing_to_mask(joined, redactor):
        # One decode for the lot: the lines are JSON objects this store wrote.
        return [_shown(message) for message in json.loads(f"[{joined}]")], False
    redacted = False
    messages: list[dict[str, Any]] = []
    for line in lines:
        shown = _shown(json.loads(line))
        if not _nothing_to_mask(line, redactor):
            masked = redactor.mask(shown)
            redacted = redacted or masked != shown
            shown = masked
        messages.append(shown)
    return messages, redacted


def _shown(message: dict[str, Any]) -> dict[str, Any]:
    """``with_provenance(clean_for_reader(message))``, made in place: the message was just
    decoded here and nothing else holds it, so the copies those make are not needed."""
    if message.get("role") == "user":
        content = message.get("content")
        if isinstance(content, list):
            for block in content:
                text = block.get("text")
                if block.get("type") == "text" and isinstance(text, str):
                    block["text"] = strip_envelope(text)
    if not isinstance(message.get("provenance"), dict):
        message["provenance"] = default_provenance_shown(message.get("role"))
    return message


def _nothing_to_mask(text: str, redactor: Redactor) -> bool:
    """True only when masking the messages decoded from the JSON ``text`` (then cleaned
    and given provenance) returns them unchanged.

    The redactor masks strings. Without a backslash the text has no escapes, so every
    string it decodes to is the piece of the text between two quotes; a cleaned user
    text is such a string, or its end after an envelope's closing ``] `` (removing
    ``[message_id: …]`` lines needs a newline, which JSON escapes). Each is a piece
    beside non-word characters, which ``Redactor.finds_nothing_in`` covers. The default
    provenance is not in the text, so it is checked on its own.
    """
    return (
        "\\" not in text and redactor.finds_nothing_in(text) and _keeps_default_provenance(redactor)
    )


@lru_cache(maxsize=16)
def _keeps_default_provenance(redactor: Redactor) -> bool:
    # Once per redactor (there is one per configured set of patterns).
    return all(redactor.mask(kind) == kind for kind in _DEFAULT_PROVENANCE)

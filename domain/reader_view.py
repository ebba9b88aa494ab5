"""Stored transcript lines as a reader gets them: ``sessions_history``, the messages of
``sessions_list`` and the console's transcript all read them through ``reader_messages``.

Each line is decoded, its user text cleaned of channel envelopes (as ``clean_for_reader``
does), given its provenance (as ``with_provenance`` does) and, when another session reads
it, masked by the redactor. Most lines hold no secret: when the redactor finds nothing in the stored
JSON text itself, masking could change nothing, and the walk over every message is
skipped (``_nothing_to_mask`` says why that is exact).
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import lru_cache
from typing import Any

import orjson
from pydantic_core import to_json
from sessionwire.domain.causality import default_provenance_shown
from sessionwire.domain.json_text import decode, encoded_size, has_long_number
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
    messages, redacted, _ = _view(lines, redactor)
    return messages, redacted


def history_view(
    lines: Sequence[str], redactor: Redactor | None
) -> tuple[list[dict[str, Any]], bool, int]:
    """``reader_view``, and the length in bytes of the messages' compact JSON."""
    messages, redacted, from_orjson = _view(lines, redactor)
    return messages, redacted, encoded_size(messages, from_orjson=from_orjson)


def _view(
    lines: Sequence[str], redactor: Redactor | None
) -> tuple[list[dict[str, Any]], bool, bool]:
    """The messages, whether masking changed any, and whether orjson decoded them all."""
    joined = ",".join(lines)
    if redactor is None or _nothing_to_mask(joined, redactor):
        # One decode for the lot: the lines are JSON objects this store wrote.
        decoded, from_orjson = decode(f"[{joined}]")
        return [_shown(message) for message in decoded], False, from_orjson
    redacted = False
    every_from_orjson = True
    messages: list[dict[str, Any]] = []
    for line in lines:
        message, from_orjson = decode(line)
        every_from_orjson = every_from_orjson and from_orjson
        shown = _shown(message)
        if not _nothing_to_mask(line, redactor):
            masked = redactor.mask(shown)
            redacted = redacted or masked != shown
            shown = masked
        messages.append(shown)
    return messages, redacted, every_from_orjson


def _shown(message: dict[str, Any]) -> dict[str, Any]:
    """``with_provenance(clean_for_reader(message))``, made in place: the message was just
    decoded here and nothing else holds it, so the copies those make are not needed."""
    if message.get("role") == "user":
        content = message.get("content")
        if isinstance(content, list):
            for block in content:
                text = block.get("text")
                # ``strip_envelope`` changes only a text that opens with an envelope's
                # "[" or holds a message_id line: any other is left as it is, uncalled.
                if (
                    isinstance(text, str)
                    and (text[:1] == "[" or "[message_id:" in text)
                    and block.get("type") == "text"
                ):
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


# History views rendered at write time (ADR 0054) ----------------------------------------

VIEW_RENDERING = 1
"""The version of what ``rendered_view`` does (the cleaning, the provenance, the masking
walk): a change to any of them bumps it, and every view rendered before is rendered again
on read, as views rendered under other patterns are."""


def view_stamp(redactor: Redactor | None) -> str:
    """What a view rendered for readers of other sessions depends on: the rendering's
    version and the patterns that masked it (``-``: masking off)."""
    return f"{VIEW_RENDERING}:{redactor.fingerprint if redactor is not None else '-'}"


def rendered_view(line: str, redactor: Redactor | None) -> tuple[str | None, str | None, bool]:
    """What ``history_view`` would answer for the stored ``line`` (the text the store
    reads for a message, default provenance included), rendered once, when it is written:
    (the session's own view when it is not ``line`` itself, the view of another session's
    reader when masking changed it, whether only the standard library decodes it exactly).

    Most lines give (None, None, False): the store then answers the line as stored."""
    decoded: Any = None
    exact = has_long_number(line)
    own: str | None = None
    shown_text = line
    if exact or ('"role":"user"' in line and ('"text":"[' in line or "[message_id:" in line)):
        # A text ``_shown`` may change (an envelope, a message_id line) or a number only
        # ``json.loads`` reads: rendered as a read renders it.
        decoded, from_orjson = decode(line)
        exact = not from_orjson
        shown_text = _encoded(_shown(decoded), exact)
        own = None if shown_text == line else shown_text
    if redactor is None or _nothing_to_mask(shown_text, redactor):
        return own, None, exact
    if decoded is None:
        decoded, from_orjson = decode(line)
        exact = not from_orjson
        decoded = _shown(decoded)
    masked = redactor.mask(decoded)
    other = None if masked == decoded else _encoded(masked, exact)
    return own, other, exact


def _encoded(value: Any, exact: bool) -> str:
    """``value``'s compact JSON as ``encoded_size`` measures it."""
    return (to_json(value) if exact else orjson.dumps(value)).decode()

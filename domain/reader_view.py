"""Stored transcript lines as a reader gets them: ``sessions_history``, the messages of
``sessions_list`` and the console's transcript all read them through ``reader_messages``.

Each line is decoded, its user text cleaned of channel envelopes (``clean_for_reader``),
given its provenance (``with_provenance``) and, when another session reads it, masked by
the redactor. Most lines hold no secret: when the redactor finds nothing in the stored
JSON text itself, masking could change nothing, and the walk over every message is
skipped (``_nothing_to_mask`` says why that is exact).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from sessionwire.domain.causality import with_provenance
from sessionwire.domain.redaction import Redactor
from sessionwire.domain.transcript import clean_for_reader

# What with_provenance adds to a line recorded without provenance: not in the stored text.
_DEFAULT_PROVENANCE = (
    with_provenance({"role": "user"})["provenance"],
    with_provenance({"role": "assistant"})["provenance"],
)


def reader_messages(lines: Sequence[str], redactor: Redactor | None) -> list[dict[str, Any]]:
    """The stored JSON ``lines`` as readers get them, masked by ``redactor`` unless None."""
    joined = ",".join(lines)
    if redactor is None or _nothing_to_mask(joined, redactor):
        # One decode for the lot: the lines are JSON objects this store wrote.
        return [with_provenance(clean_for_reader(m)) for m in json.loads(f"[{joined}]")]
    return [_masked(line, redactor) for line in lines]


def _masked(line: str, redactor: Redactor) -> dict[str, Any]:
    shown = with_provenance(clean_for_reader(json.loads(line)))
    return shown if _nothing_to_mask(line, redactor) else redactor.mask(shown)


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
        "\\" not in text
        and redactor.finds_nothing_in(text)
        and all(redactor.mask(kind) == kind for kind in _DEFAULT_PROVENANCE)
    )

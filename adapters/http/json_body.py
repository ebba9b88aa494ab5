"""JSON bodies written by orjson (issue 23: an HTTP answer's encoding, docs/benchmarks.md).

orjson writes what the standard library's compact, ``ensure_ascii=False`` encoding writes
for strings, 64-bit integers, finite floats, lists and string-keyed dicts. What it would
write differently, or refuses (an integer beyond 64 bits, a key that is not a string, a
subclass of a builtin, a dataclass or a datetime, which the options below pass through
to a refusal), is left to the standard library, which writes it, or fails, as before.
A non-finite float (JSON has none, and no stored message holds one: the transcript
refuses them) is the one value orjson writes (as ``null``) where it would not.
"""

from __future__ import annotations

import json
from typing import Any

import orjson
from fastapi.responses import JSONResponse

_PASS_THROUGH = (
    orjson.OPT_PASSTHROUGH_SUBCLASS
    | orjson.OPT_PASSTHROUGH_DATACLASS
    | orjson.OPT_PASSTHROUGH_DATETIME
)


def compact_json(value: Any) -> str:
    """``json.dumps(value, separators=(",", ":"), ensure_ascii=False)``."""
    try:
        return orjson.dumps(value, option=_PASS_THROUGH).decode()
    except orjson.JSONEncodeError:
        return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


class OrjsonResponse(JSONResponse):
    """Starlette's ``JSONResponse`` (compact, UTF-8, no NaN), encoded by orjson."""

    def render(self, content: Any) -> bytes:
        try:
            return orjson.dumps(content, option=_PASS_THROUGH)
        except orjson.JSONEncodeError:
            return super().render(content)

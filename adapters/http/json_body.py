"""JSON bodies written by orjson (issue 23: an HTTP answer's encoding, docs/benchmarks.md).

orjson writes what the standard library's compact, ``ensure_ascii=False`` encoding writes
for strings, 64-bit integers, finite floats (but below 1e-4: orjson writes 0.00002 and
2e-7 where ``repr`` writes 2e-05 and 2e-07), lists and string-keyed dicts. What it would
write differently, or refuses (an integer beyond 64 bits, a key that is not a string, a
subclass of a builtin, a dataclass or a datetime, which the options below pass through
to a refusal), is left to the standard library, which writes it, or fails, as before.
A non-finite float (JSON has none, and no stored message holds one: the transcript
refuses them) is the one value orjson writes (as ``null``) where it would not.
"""

from __future__ import annotations

import json
import re
from typing import Any

import orjson
from fastapi.responses import JSONResponse

_PASS_THROUGH = (
    orjson.OPT_PASSTHROUGH_SUBCLASS
    | orjson.OPT_PASSTHROUGH_DATACLASS
    | orjson.OPT_PASSTHROUGH_DATETIME
)

# Where orjson's floats part from repr's: a fixed-point float below 1e-4, or a one-digit
# negative exponent. A string holding the same characters only costs the slower path.
_FLOAT_UNLIKE_REPR = re.compile(rb"0\.0000|e-\d(?!\d)")


def _orjson(value: Any) -> bytes | None:
    """orjson's encoding of ``value``, or None where the standard library's differs."""
    try:
        written = orjson.dumps(value, option=_PASS_THROUGH)
    except orjson.JSONEncodeError:
        return None
    return None if _FLOAT_UNLIKE_REPR.search(written) else written


def compact_json(value: Any) -> str:
    """``json.dumps(value, separators=(",", ":"), ensure_ascii=False)``."""
    written = _orjson(value)
    if written is None:
        return json.dumps(value, separators=(",", ":"), ensure_ascii=False)
    return written.decode()


class OrjsonResponse(JSONResponse):
    """Starlette's ``JSONResponse`` (compact, UTF-8, no NaN), encoded by orjson."""

    def render(self, content: Any) -> bytes:
        written = _orjson(content)
        return super().render(content) if written is None else written

"""JSON text decoded and measured through orjson, with the standard library's answer
wherever orjson's would differ (issue 23: orjson where it wins, docs/benchmarks.md).

orjson decodes the same values as ``json.loads`` except for numbers: an integer outside
the 64-bit range becomes a float, and what overflows a double (``1e400``) or is not a
JSON number (``NaN``, ``Infinity``) is refused. A text holding a run of 19 or more
digits (every integer orjson would turn into a float has one) or that orjson refuses is
decoded by ``json.loads`` instead. Whatever orjson did decode holds only finite floats
and 64-bit integers, and those orjson encodes byte for byte as pydantic's ``to_json``.
"""

from __future__ import annotations

import json
from typing import Any

import orjson
from pydantic_core import to_json

# Every digit becomes "0", everything else a space: a long run of digits is a run of "0".
_DIGITS_ONLY = bytes(48 if 48 <= byte <= 57 else 32 for byte in range(256))
_LONG_NUMBER = b"0" * 19


def has_long_number(text: str) -> bool:
    """Whether ``text`` holds a run of 19 or more digits (orjson may read it inexactly)."""
    return _LONG_NUMBER in text.encode("utf-8", "surrogatepass").translate(_DIGITS_ONLY)


def decode(text: str) -> tuple[Any, bool]:
    """``json.loads(text)``, and whether orjson decoded it (``encoded_size`` may then
    encode it with orjson too)."""
    if has_long_number(text):
        return json.loads(text), False
    try:
        return orjson.loads(text), True
    except orjson.JSONDecodeError:
        return json.loads(text), False


def encoded_size(value: Any, *, from_orjson: bool) -> int:
    """The length in bytes of ``value``'s compact JSON as pydantic's ``to_json`` writes
    it; ``from_orjson``: ``value`` is (made of) what ``decode`` decoded with orjson."""
    if from_orjson:
        try:
            return len(orjson.dumps(value))
        except orjson.JSONEncodeError:
            pass
    return len(to_json(value))

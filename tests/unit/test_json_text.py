"""domain/json_text.py: orjson where it gives what the standard library gives, the
standard library where it would not (numbers beyond 64 bits or a double)."""

from __future__ import annotations

import json
import math
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic_core import to_json
from sessionwire.domain.json_text import decode, encoded_size

JSON_VALUES = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=5), children, max_size=4)
    ),
    max_leaves=12,
)


@given(JSON_VALUES)
def test_a_value_decodes_and_measures_as_the_standard_library_and_pydantic_say(
    value: Any,
) -> None:
    for text in (json.dumps(value), json.dumps(value, ensure_ascii=False)):
        decoded, from_orjson = decode(text)
        assert decoded == json.loads(text)
        assert json.dumps(decoded) == json.dumps(json.loads(text))  # types and key order too
        assert encoded_size(decoded, from_orjson=from_orjson) == len(to_json(decoded))


@pytest.mark.parametrize(
    "text",
    [
        "[123456789012345678901234567890]",  # orjson alone: a float
        "[-9223372036854775809]",
        "[18446744073709551616]",
        '{"n":1e400}',  # orjson alone: refused
        "[NaN, Infinity, -Infinity]",
    ],
)
def test_numbers_orjson_would_change_are_decoded_by_the_standard_library(text: str) -> None:
    decoded, from_orjson = decode(text)
    assert from_orjson is False
    assert json.dumps(decoded) == json.dumps(json.loads(text))
    assert encoded_size(decoded, from_orjson=False) == len(to_json(decoded))


def test_an_ordinary_text_is_decoded_by_orjson() -> None:
    decoded, from_orjson = decode('[{"role":"user","timestamp":1795763819685,"x":1.5}]')
    assert from_orjson is True
    assert decoded == [{"role": "user", "timestamp": 1795763819685, "x": 1.5}]


def test_an_infinity_is_measured_as_pydantic_writes_it() -> None:
    decoded, from_orjson = decode("[1e400]")
    assert math.isinf(decoded[0])
    assert encoded_size(decoded, from_orjson=from_orjson) == len(b"[Infinity]")

"""adapters/http/json_body.py: orjson writes the bytes the standard library wrote, or
the standard library writes them."""

from __future__ import annotations

import json
from typing import Any

from fastapi.responses import JSONResponse
from hypothesis import example, given
from hypothesis import strategies as st
from sessionwire.adapters.http.json_body import OrjsonResponse, compact_json

VALUES = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(),
    lambda children: (
        st.lists(children, max_size=4)
        | st.dictionaries(st.text(max_size=5) | st.integers(), children, max_size=4)
    ),
    max_leaves=12,
)


@given(VALUES)
# Once drawn at random: orjson writes floats below 1e-4 unlike repr (0.0000286..., 2e-7).
@example(2.863167408342303e-05)
@example([1.5e-07, "0.00001 e-7"])
@example({"x": -9.5e-10})
def test_a_body_is_what_the_standard_library_wrote(value: Any) -> None:
    assert compact_json(value) == json.dumps(value, separators=(",", ":"), ensure_ascii=False)
    assert OrjsonResponse(value).body == JSONResponse(value).body

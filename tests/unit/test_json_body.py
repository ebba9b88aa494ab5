"""adapters/http/json_body.py: orjson writes the bytes the standard library wrote, or
the standard library writes them."""

from __future__ import annotations

import json
from typing import Any

from fastapi.responses import JSONResponse
from hypothesis import given
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
def test_a_body_is_what_the_standard_library_wrote(value: Any) -> None:
    assert compact_json(value) == json.dumps(value, separators=(",", ":"), ensure_ascii=False)
    assert OrjsonResponse(value).body == JSONResponse(value).body

"""docs/yield.md: its example runs as written and prints what the page says."""

from __future__ import annotations

import re

from test_docs_examples import DOCS, FENCE, run_python


def test_the_yield_page_example_prints_what_the_page_shows() -> None:
    out = run_python("yield.md")
    text = (DOCS / "yield.md").read_text(encoding="utf-8")
    shown = [body for lang, body in FENCE.findall(text) if lang == "text"][-1]
    assert out == shown


def test_the_yield_page_names_every_parameter_of_the_schema() -> None:
    from sessionwire.application.tools.schemas import tool_parameters

    text = (DOCS / "yield.md").read_text(encoding="utf-8")
    documented = set(re.findall(r"^\| `(\w+)` \|", text, re.MULTILINE))
    assert set(tool_parameters("sessions_yield")["properties"]) <= documented

"""docs/schedules.md: its examples run as written and print what the page says, and the
page names every parameter ``Gateway.schedule`` takes."""

from __future__ import annotations

import inspect
import re

from test_docs_examples import DOCS, FENCE, run_python


def test_the_schedules_page_examples_print_what_the_page_shows() -> None:
    out = run_python("schedules.md")
    text = (DOCS / "schedules.md").read_text(encoding="utf-8")
    shown = "".join(body for lang, body in FENCE.findall(text) if lang == "text")
    assert out == shown


def test_the_schedules_page_names_every_parameter_of_gateway_schedule() -> None:
    from sessionwire import Gateway

    text = (DOCS / "schedules.md").read_text(encoding="utf-8")
    documented = set(re.findall(r"^\| `(\w+)` \|", text, re.MULTILINE))
    assert set(inspect.signature(Gateway.schedule).parameters) - {"self"} <= documented

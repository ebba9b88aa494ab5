"""docs/input.md: its approval example runs as written and prints what the page says."""

from __future__ import annotations

from test_docs_examples import DOCS, FENCE, run_python


def test_the_input_page_example_prints_what_the_page_shows() -> None:
    out = run_python("input.md")
    text = (DOCS / "input.md").read_text(encoding="utf-8")
    shown = [body for lang, body in FENCE.findall(text) if lang == "text"][-1]
    assert out == shown

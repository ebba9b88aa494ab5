"""docs/search.md's example runs as written and prints what the page shows."""

from __future__ import annotations

from test_docs_examples import blocks, run_python


def test_search_examples_run_and_print_what_the_page_shows() -> None:
    assert run_python("search.md") == "".join(blocks("search.md", "text"))

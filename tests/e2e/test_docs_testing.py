"""docs/testing.md: every python block runs. Blocks holding pytest tests run through
pytest itself (with the sessionwire plugin); the others run in order, sharing names."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

pytest_plugins = ["pytester"]

PAGE = Path(__file__).resolve().parents[2] / "docs" / "testing.md"
BLOCK = re.compile(r"^```python\n(.*?)^```", re.DOTALL | re.MULTILINE)


def blocks() -> list[str]:
    """The python blocks, each padded with blank lines so tracebacks show page lines."""
    text = PAGE.read_text(encoding="utf-8")
    return [
        "\n" * text.count("\n", 0, match.start(1)) + match.group(1)
        for match in BLOCK.finditer(text)
    ]


def test_the_page_has_examples_of_both_kinds() -> None:
    found = blocks()
    assert len(found) >= 5
    assert any("def test_" in block for block in found)


def test_the_page_holds_no_notes_of_the_tracker() -> None:
    # "issue 12 item 2" means something to the maintainers, nothing to a reader.
    text = PAGE.read_text(encoding="utf-8")
    assert re.findall(r"(?i)\bissue[- ]\d+[^.;)]*", text) == []


def test_the_examples_run() -> None:
    namespace: dict[str, object] = {"__name__": "docs_testing"}
    for block in blocks():
        if "def test_" not in block:
            exec(compile(block, str(PAGE), "exec"), namespace)


def test_the_pytest_examples_pass_on_each_store(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("SESSIONWIRE_TEST_POSTGRES", raising=False)
    tests = [block for block in blocks() if "def test_" in block]
    pytester.makepyfile(**{f"test_doc_{n}": block for n, block in enumerate(tests)})
    result = pytester.runpytest_subprocess("-o", "asyncio_mode=auto")
    result.assert_outcomes(passed=2 * len(tests))


def test_the_page_keeps_no_dated_history() -> None:
    # A tutorial, not a log: dated runs live in benchmarks/results/ (outside code blocks,
    # where an example may carry a date of its own).
    prose = re.sub(r"^```.*?^```", "", PAGE.read_text(), flags=re.M | re.S)
    dates = set(re.findall(r"\b20\d\d-\d\d-\d\d\b", prose))
    assert dates <= {"2026-05-01"}  # the `clock` fixture's start, not a run's date


def test_the_page_says_where_freezegun_comes_from() -> None:
    import tomllib

    project = tomllib.loads((PAGE.parents[1] / "pyproject.toml").read_text())["project"]
    assert any(dep.startswith("freezegun") for dep in project["optional-dependencies"]["dev"])
    assert not any(dep.startswith("freezegun") for dep in project["dependencies"])
    assert "freezegun is not a dependency of sessionwire: it comes with\nthe `dev` extra" in (
        PAGE.read_text()
    )

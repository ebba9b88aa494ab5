"""docs/conformance.md stays honest: it lists every case of OpenClaw's conformance file,
no case that is not there, and only tests that exist.

The reference file lives outside the repository (``../shared/reference`` beside the
clone, as in CI). In a git worktree it is found beside the main checkout. Outside CI a
missing reference skips the comparison with the reason; under ``CI=true`` it fails.
"""

from __future__ import annotations

import ast
import functools
import os
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
TABLE = ROOT / "docs" / "conformance.md"
REFERENCE = Path("shared") / "reference" / "openclaw-conformance.md"

SECTION = re.compile(r"^##+ ([A-K]\d?)\. ")
ROW = re.compile(r"^\| ([A-K]\d?\.\d+) \| (.*?) \| (.*?) \| (.*?) \|$")
NODE = re.compile(r"`(tests/[\w/]+\.py)::([\w:]+)(?:\[[^\]]*\])?`")


def reference_candidates() -> list[Path]:
    """``../shared`` beside this checkout, and beside the main checkout of a worktree."""
    candidates = [ROOT.parent / REFERENCE]
    dot_git = ROOT / ".git"
    if dot_git.is_file():  # a worktree: ".git" says "gitdir: <main>/.git/worktrees/<name>"
        gitdir = Path(dot_git.read_text(encoding="utf-8").removeprefix("gitdir:").strip())
        common = gitdir / "commondir"
        if common.is_file():
            main_git = (gitdir / common.read_text(encoding="utf-8").strip()).resolve()
            candidates.append(main_git.parent.parent / REFERENCE)
    return candidates


def reference_file() -> Path:
    for candidate in reference_candidates():
        if candidate.is_file():
            return candidate
    tried = ", ".join(str(path) for path in reference_candidates())
    if os.environ.get("CI") == "true":
        pytest.fail(f"openclaw-conformance.md is missing under CI (looked at {tried})")
    pytest.skip(f"openclaw-conformance.md is not beside this checkout (looked at {tried})")


def reference_cases(text: str) -> list[str]:
    """Case ids of the reference: section (or D1…D4) and the top-level bullet's position."""
    cases: list[str] = []
    section: str | None = None
    count = 0
    for line in text.splitlines():
        heading = SECTION.match(line)
        if heading:
            section, count = heading.group(1), 0
        elif section and line.startswith("* "):
            count += 1
            cases.append(f"{section}.{count}")
    return cases


def table_rows() -> dict[str, tuple[str, str]]:
    """Case id → (test cell, differs cell) of docs/conformance.md; a case listed twice fails."""
    rows: dict[str, tuple[str, str]] = {}
    for line in TABLE.read_text(encoding="utf-8").splitlines():
        row = ROW.match(line)
        if row:
            case = row.group(1)
            assert case not in rows, f"{case} is listed twice in docs/conformance.md"
            rows[case] = (row.group(3), row.group(4))
    return rows


@functools.cache  # the table names a few files hundreds of times
def defined_tests(path: Path) -> set[str]:
    """``name`` and ``Class::name`` of every test function in a test file."""
    names: set[str] = set()
    for node in ast.parse(path.read_text(encoding="utf-8")).body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            names.add(node.name)
        elif isinstance(node, ast.ClassDef):
            names.update(
                f"{node.name}::{item.name}"
                for item in node.body
                if isinstance(item, ast.FunctionDef | ast.AsyncFunctionDef)
            )
    return {name for name in names if name.split("::")[-1].startswith("test_")}


def test_reference_cases_are_counted_as_the_table_expects() -> None:
    text = (
        "## B. `sessions_list`\n* one\n  * nested, not a case\n* two\n"
        "### D4. `sessions_send` [derived]\n* three\n"
    )
    assert reference_cases(text) == ["B.1", "B.2", "D4.1"]


def test_every_case_of_the_reference_is_in_the_table_and_nothing_else() -> None:
    cases = reference_cases(reference_file().read_text(encoding="utf-8"))
    assert len(cases) > 100, "the reference file no longer has the expected shape"
    listed = table_rows()
    assert [case for case in cases if case not in listed] == [], "cases missing from the table"
    assert [case for case in listed if case not in cases] == [], "rows that are not cases"


def test_every_row_names_an_existing_test_or_says_why_not() -> None:
    missing: list[str] = []
    untested: list[str] = []
    for case, (tests, _) in table_rows().items():
        nodes = NODE.findall(tests)
        if not nodes:
            if not tests.startswith("n/a: "):
                untested.append(case)
            continue
        for file, name in nodes:
            path = ROOT / file
            if not path.is_file() or name not in defined_tests(path):
                missing.append(f"{case}: {file}::{name}")
    assert untested == [], "rows with neither a test nor an n/a reason"
    assert missing == [], "rows naming tests that do not exist"


def test_the_table_covers_every_section() -> None:
    sections = {case.split(".")[0].rstrip("1234") for case in table_rows()}
    assert sections == set("ABCDEFGHIJK")

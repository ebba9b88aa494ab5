"""The paperwork resolves inside the repository: every "decision N" the code or the docs
cite is an entry of docs/decisions.md, every ADR file is in the ADR index (and every
number the index skips says why), and every link or path the docs and the code give to a
repository file names one that exists.

Each expectation is read from the files as a reader would follow it (the citation in the
text, the file on disk), not from any list the project keeps of them.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DECISIONS = ROOT / "docs" / "decisions.md"
ADR_DIR = ROOT / "docs" / "adr"
CODE_DIRS = ("domain", "application", "adapters", "public", "tests")

# "decision 17", "decisions 13 and 14", "decisions 23, 24 and 28", "decision 5.1" (§5, 1).
CITATION = re.compile(r"\b[Dd]ecisions? (\d+(?:\.\d+)?(?:(?:, | and | or |–)\d+)*)")
LINK = re.compile(r"\]\(([^)\s]+)\)")
CODE_PATH = re.compile(r"\b((?:docs|benchmarks/results)/[\w./-]+\.md)\b")


def _code_files() -> list[Path]:
    return [path for folder in CODE_DIRS for path in sorted((ROOT / folder).rglob("*.py"))]


def _doc_files() -> list[Path]:
    return [
        ROOT / "README.md",
        *sorted((ROOT / "docs").glob("*.md")),
        *sorted(ADR_DIR.glob("*.md")),
        *sorted((ROOT / "benchmarks" / "results").glob("*.md")),
    ]


def _cited(text: str) -> set[int]:
    found: set[int] = set()
    for match in CITATION.finditer(text):
        for number in re.split(r", | and | or |–", match.group(1)):
            # "decision 5.1" is the contract's §5, item 1: decision 1.
            found.add(int(number.split(".")[1] if "." in number else number))
    return found


def _entries() -> dict[int, str]:
    text = DECISIONS.read_text()
    return {
        int(number): body
        for number, body in re.findall(r"^### (\d+)\. (.+?)(?=^### |\Z)", text, re.M | re.S)
    }


def test_the_decisions_are_numbered_one_to_the_last_without_a_gap() -> None:
    numbers = sorted(_entries())
    assert numbers == list(range(1, len(numbers) + 1))
    assert len(numbers) >= 41  # the contract's §5 to §8


def test_every_decision_entry_names_its_record_or_says_there_is_none_yet() -> None:
    for number, body in _entries().items():
        assert re.search(r"^ADR: (\[\d{4}\]\(adr/\d{4}-[^)]+\.md\)|none yet)", body, re.M), number


@pytest.mark.parametrize("kind", ["code", "docs"])
def test_every_decision_cited_is_an_entry(kind: str) -> None:
    files = _code_files() if kind == "code" else _doc_files()
    entries = set(_entries())
    missing = {
        f"{path.relative_to(ROOT)}: decision {number}"
        for path in files
        for number in _cited(path.read_text(errors="replace"))
        if number not in entries
    }
    assert not missing, sorted(missing)


def test_the_code_cites_decisions_so_the_check_above_sees_them() -> None:
    cited = set().union(*(_cited(path.read_text()) for path in _code_files()))
    assert {17, 20, 23, 28, 31} <= cited


def test_every_adr_file_is_in_the_index_and_every_number_skipped_says_why() -> None:
    index = (ADR_DIR / "README.md").read_text()
    files = {path.name[:4]: path.name for path in ADR_DIR.glob("[0-9][0-9][0-9][0-9]-*.md")}
    linked = dict(re.findall(r"^\| \[(\d{4})\]\((\d{4}-[^)]+\.md)\)", index, re.M))
    assert linked == {number: files[number] for number in linked}, "index links a wrong file"
    assert set(files) <= set(linked), f"not in the index: {sorted(set(files) - set(linked))}"
    unlinked = re.findall(r"^\| (\d{4}) \| (.+?) \|", index, re.M)
    for number, why in unlinked:
        assert number not in files
        assert "never used" in why or "withdrawn" in why, number
    reserved = set(
        re.findall(r"\b(\d{4})\b", index.split("Reserved for records", 1)[1].split("\n\n")[0])
    )
    everything = sorted({*linked, *(number for number, _ in unlinked), *reserved})
    last = int(everything[-1])
    assert everything == [f"{n:04d}" for n in range(1, last + 1)], "a number is missing"


def _target(source: Path, link: str) -> Path | None:
    if re.match(r"^[a-z][a-z0-9+.-]*:", link) or link.startswith("#"):
        return None  # a URL, or a place in the same page
    return (source.parent / link.split("#", 1)[0]).resolve()


def test_every_link_in_the_docs_to_a_repository_file_resolves() -> None:
    broken = [
        f"{source.relative_to(ROOT)}: {link}"
        for source in _doc_files()
        for link in LINK.findall(source.read_text())
        if (target := _target(source, link)) is not None and not target.exists()
    ]
    assert not broken, broken


def test_every_docs_path_named_in_the_code_exists() -> None:
    missing = [
        f"{path.relative_to(ROOT)}: {named}"
        for path in _code_files()
        for named in CODE_PATH.findall(path.read_text())
        if not (ROOT / named).exists()
    ]
    assert not missing, missing

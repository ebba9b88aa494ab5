"""The tools written in named steps stay so (ADR 0037 §3 and its issue-37 amendment): no
function in their modules above cyclomatic complexity 12, measured as the ADR measured
it (radon's ``cc_visit``: every branch, loop, ``and``/``or``, comprehension ``if`` and
``except`` counts one)."""

from __future__ import annotations

import importlib
from pathlib import Path

import pytest
from radon.complexity import cc_visit

MAX_COMPLEXITY = 12
NAMED_STEPS = (
    "sessionwire.application.tools.sessions_spawn",
    "sessionwire.application.tools.sessions_yield",
    "sessionwire.application.tools.session_status",
)


def _complexities(source: str) -> dict[str, int]:
    return {block.fullname: block.complexity for block in cc_visit(source)}


@pytest.mark.parametrize("module", NAMED_STEPS)
def test_no_function_of_a_named_steps_tool_is_above_the_limit(module: str) -> None:
    path = importlib.import_module(module).__file__
    assert path is not None
    found = _complexities(Path(path).read_text(encoding="utf-8"))
    assert found, f"radon found no function in {module}"
    over = {name: cc for name, cc in found.items() if cc > MAX_COMPLEXITY}
    assert over == {}, f"{module}: split these into named steps (CC > {MAX_COMPLEXITY}): {over}"


def test_the_measure_counts_what_the_limit_is_about() -> None:
    # A function of one branch per line, thirteen in all, is over the limit: the measure
    # the limit is checked with sees branches (a wrong measure would pass any module).
    branches = "".join(f"    if x == {n}:\n        return {n}\n" for n in range(12))
    assert _complexities(f"def f(x):\n{branches}    return -1\n") == {"f": 13}

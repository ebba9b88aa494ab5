"""A child's report wakes the yields of its parent's session (found by mutation testing,
docs/testing.md "What mutation testing left": the simulator's yields always wait on the
gateway that drives them, so the fallback below was never taken)."""

from __future__ import annotations

from typing import Any

from sessionwire.application.orchestration.yields import YieldDriver

KEY = "agent:main:main"


class Starts:
    """The in-flight registry as child_reported uses it: what it was asked to start."""

    def __init__(self) -> None:
        self.owners: list[Any] = []

    def start(self, work: Any, owner: Any, **_: Any) -> None:
        work.close()  # not run: only whether it was started matters here
        self.owners.append(owner)


def test_a_report_with_no_yield_waiting_here_drives_the_sessions_waiting_yields() -> None:
    # None waits here: one may wait on another gateway, or on none (its driver stopped).
    starts = Starts()
    driver: Any = YieldDriver(
        store=None,  # type: ignore[arg-type]
        in_flight=starts,  # type: ignore[arg-type]
        clock=None,  # type: ignore[arg-type]
        runs=None,  # type: ignore[arg-type]
        config=None,  # type: ignore[arg-type]
        budgets=None,  # type: ignore[arg-type]
    )

    driver.child_reported(KEY)

    assert [(owner.kind, owner.id) for owner in starts.owners] == [("yield", KEY)]

"""Saves a writer thread settles together reach the loop one per turn, in commit order."""

from __future__ import annotations

import asyncio
import threading

from sessionwire.adapters.store.loop_handoff import LoopHandoff, Outcome, Settlement


async def test_saves_settled_together_are_settled_one_per_loop_turn() -> None:
    loop = asyncio.get_running_loop()
    seen: list[str] = []
    last = loop.create_future()

    def settled(name: str) -> Settlement:
        def run(outcome: Outcome) -> None:
            seen.append(name)
            # What a settled save wakes (its caller) runs before the next save settles.
            loop.call_soon(seen.append, f"woken by {name}")
            if name == "c":
                loop.call_soon(last.set_result, None)

        return Settlement(run, lambda: None, None)

    handoff = LoopHandoff(loop)
    writer = threading.Thread(target=lambda: [handoff.put(settled(n)) for n in "abc"])
    writer.start()
    writer.join()
    await last
    assert seen == ["a", "woken by a", "b", "woken by b", "c", "woken by c"]


def test_settlements_for_a_closed_loop_are_abandoned_not_lost() -> None:
    loop = asyncio.new_event_loop()
    handoff = LoopHandoff(loop)
    outcomes: list[str] = []
    handoff.put(Settlement(lambda o: outcomes.append("settled"), lambda: None, None))
    loop.close()  # the scheduled turn never runs
    for _ in range(2):
        handoff.put(
            Settlement(lambda o: outcomes.append("settled"), lambda: outcomes.append("lost"), None)
        )
    # Each put after the close finds nothing will run and says so for what it holds.
    assert outcomes == ["lost", "lost"]

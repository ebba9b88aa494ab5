"""The loop guard (decision 23): the product taking a database connection on the event
loop's thread fails; a test's own blocking reads do not."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from sessionwire import GatewayConfig
from sessionwire.adapters.bootstrap import open_event_store
from sessionwire.adapters.store.loop_guard import SqlOnLoopThread, armed

KEY = "agent:main:main"


@pytest.fixture
def store(tmp_path: Path):  # type: ignore[no-untyped-def]
    opened = open_event_store(f"sqlite:///{tmp_path}/s.db", GatewayConfig())
    yield opened
    opened.close()


def test_the_suite_runs_armed() -> None:
    assert armed()


async def test_a_test_reads_the_blocking_store_itself(store) -> None:  # type: ignore[no-untyped-def]
    assert store.session(KEY) is None


async def test_a_product_coroutine_that_blocks_is_refused(store) -> None:  # type: ignore[no-untyped-def]
    # A coroutine of the product's between the test and the connection: the product
    # blocked the loop, whoever awaited it. (Planted: compiled as a product file.)
    planted: dict[str, object] = {}
    source = "async def lookup(store, key):\n    return store.session(key)\n"
    exec(compile(source, "/sessionwire/application/planted.py", "exec"), planted)
    with pytest.raises(SqlOnLoopThread, match=r"planted\.py"):
        await planted["lookup"](store, KEY)  # type: ignore[operator]


def test_a_callback_the_loop_runs_is_the_products_even_on_a_tests_loop(store) -> None:  # type: ignore[no-untyped-def]
    # A benchmark or a test that runs the loop itself: a plain product callback the loop
    # runs (a settled save's) is still the product's, not the test's.
    caught: list[BaseException] = []

    async def main() -> None:
        loop = asyncio.get_running_loop()
        loop.set_exception_handler(lambda _loop, context: caught.append(context["exception"]))
        loop.call_soon(store.session, KEY)
        await asyncio.sleep(0)
        await asyncio.sleep(0)

    asyncio.run(main())
    assert [type(error) for error in caught] == [SqlOnLoopThread]

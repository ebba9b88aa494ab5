"""A gateway process that holds an SQLite store until its stdin closes, for the
one-writer test:  python -m tests.processes.holder_child STORE"""

from __future__ import annotations

import asyncio
import sys

from sessionwire import Gateway


async def main(store: str) -> None:
    gateway = await Gateway.open(store=store)
    try:
        await gateway.record_message("main", role="user", content="held")
        print("ready", flush=True)
        await asyncio.to_thread(sys.stdin.read)  # until the test closes our stdin
    finally:
        await gateway.close()


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1]))

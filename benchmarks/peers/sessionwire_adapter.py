"""sessionwire in the peers' harness: the public API on an SQLite file.

Copied into a working copy of the harness's ``adapters/`` by ``benchmarks/bench_peers.py``
and run by the project's own Python (the peers run in their own venv).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from .base import Adapter, NotSupported

REQUESTER = "agent:main:main"
PREFIX = "agent:main:bench:group:"
BULK_BATCH = 1_000


def _key(key: str) -> str:
    return PREFIX + key


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    return "".join(block.get("text", "") for block in content if isinstance(block, dict))


class SessionwireSQLite(Adapter):
    name = "sessionwire (SQLite, public API)"
    notes = "event-sourced; record_message per append, record_many prefill; tools for reads"
    distributions = ("sessionwire", "eventsourcing")

    async def open(self, path: str) -> None:
        from sessionwire import Gateway, GatewayConfig

        self.gw = await Gateway.open(config=GatewayConfig(), store=f"sqlite:///{path}")

    async def append(self, session_key: str, message: dict) -> None:
        await self.gw.record_message(
            _key(session_key),
            role=message["role"],
            content=message["content"],
            channel="bench",
            chat_type="group",
        )

    async def bulk_append(self, session_key: str, messages: Iterable[dict]) -> None:
        record_many = getattr(self.gw, "record_many", None)
        if record_many is None:  # an older sessionwire: one call per message
            for message in messages:
                await self.append(session_key, message)
            return
        batch: list[dict[str, Any]] = []
        for message in messages:
            batch.append({"role": message["role"], "content": message["content"]})
            if len(batch) >= BULK_BATCH:
                await record_many(_key(session_key), batch, channel="bench", chat_type="group")
                batch = []
        if batch:
            await record_many(_key(session_key), batch, channel="bench", chat_type="group")

    async def read_last(self, session_key: str, n: int) -> list[dict]:
        result = await self.gw.call_tool(
            REQUESTER,
            "sessions_history",
            {"sessionKey": _key(session_key), "limit": n, "includeTools": True},
        )
        if result.get("status") == "error":
            raise RuntimeError(result["error"])
        return [
            {"role": m["role"], "content": _text(m["content"]), "timestamp": m.get("timestamp")}
            for m in result["messages"]
        ]

    async def list(self, limit: int) -> list[str]:
        result = await self.gw.call_tool(REQUESTER, "sessions_list", {"limit": limit})
        return [
            row["key"].removeprefix(PREFIX).removeprefix("bench:group:")
            for row in result["sessions"]
        ]

    def read_all(self, session_key: str) -> Any:
        raise NotSupported  # history is clamped to 1,000 messages by design

    async def close(self) -> None:
        await self.gw.close()


ADAPTERS = {"sessionwire-sqlite": SessionwireSQLite}

"""The console's Schedules page (decision 36, docs/console.md): the active schedules with
their definition, next due time, last firing and counts; messages masked."""

from __future__ import annotations

import asyncio
import html
import re
from datetime import UTC, datetime
from pathlib import Path

from console_scenario import TOKEN
from fastapi import FastAPI
from fastapi.testclient import TestClient
from sessionwire import Gateway, GatewayConfig
from sessionwire.adapters.access.tokens import TokenSet
from sessionwire.adapters.bootstrap import open_event_store
from sessionwire.adapters.console.app import create_console
from sessionwire.adapters.store.off_loop import OffLoopStore
from sessionwire.testing import ScriptedRuntime, VirtualClock

AUTH = {"Authorization": f"Bearer {TOKEN}"}
SECRET = "sk-live-0123456789abcdefghijklmnop"


def words(page: str) -> str:
    return re.sub(r"\s+", " ", html.unescape(re.sub(r"<[^>]+>", " ", page)))


async def _record(url: str) -> str:
    clock = VirtualClock(start=datetime(2026, 5, 1, 12, 0, tzinfo=UTC))
    runtime = ScriptedRuntime.from_dict({"rules": [{"step": "scheduled", "reply": "ok"}]})
    gw = await Gateway.open(store=url, clock=clock, runtime=runtime)
    try:
        await gw.schedule("heartbeat", every_seconds=60, message=f"check api_key={SECRET}")
        await gw.schedule("standup", cron="0 9 * * 1-5", tz="Europe/Berlin", message="standup")
        await gw.schedule("gone", every_seconds=60, message="removed")
        await gw.unschedule("gone")
        await clock.advance(60)
        await gw.wait_idle()
        (heartbeat, _) = await gw.schedules()
        return str(heartbeat["lastRunId"])
    finally:
        await gw.close()


def test_the_schedules_page_lists_the_active_schedules_masked(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/store.db"
    run_id = asyncio.run(_record(url))
    config = GatewayConfig.load({})
    app = FastAPI()
    awaited = OffLoopStore(open_event_store(url, config))
    try:
        app.mount("/console", create_console(awaited, config, TokenSet.operator(TOKEN)))
        client = TestClient(app)
        answer = client.get("/console/schedules", headers=AUTH)
        assert answer.status_code == 200
        page = words(answer.text)
        assert "2 active schedule(s), oldest first" in page
        assert "heartbeat every 60 s agent:main:cron:heartbeat" in page
        assert "2026-05-01T12:02:00Z 2026-05-01T12:01:00Z" in page  # next due, last fired
        assert f'href="/console/traces/{run_id}"' in answer.text
        assert "standup 0 9 * * 1-5 (Europe/Berlin) agent:main:cron:standup" in page
        assert "gone" not in page
        assert SECRET not in answer.text
        assert 'href="/console/schedules"' in client.get("/console/runs", headers=AUTH).text
    finally:
        awaited.close_now()

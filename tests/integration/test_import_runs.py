"""``audit import`` replays a run of single appends to one session as the batch it amounts
to (adapters/store/audit.py ``runs_as_batches``): the read models it writes are the ones
the source holds and the ones a rebuild from the imported log gives, message by message."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from audit_rig import run_cli, stored_contents
from console_scenario import record_scenario
from sessionwire import Gateway, GatewayConfig
from sessionwire.adapters.store.audit import StoreAuditLog, runs_as_batches
from sessionwire.adapters.store.event_store import EventSourcedStore
from sessionwire.domain.session import Session
from sessionwire.testing import VirtualClock


async def record_singles(url: str, clock: VirtualClock) -> None:
    """Single appends whose runs break on every rule: origin, session, other events."""
    gateway = await Gateway.open(config=GatewayConfig(), store=url, clock=clock)
    try:
        for n in range(12):
            await gateway.record_message("main", role="user", content=f"plain {n}")
            await clock.advance(1)
        for n in range(6):  # the origin changes every other message
            channel = "whatsapp" if n % 2 else "telegram"
            await gateway.record_message(
                "main", role="user", content=f"from {channel}", channel=channel, to=f"+{n}"
            )
        for n in range(4):  # one origin, four times: a run
            await gateway.record_message(
                "main", role="user", content=f"again {n}", channel="whatsapp", to="+9"
            )
        await gateway.record_message(
            "discord:group:dev",
            role="user",
            content="group",
            channel="discord",
            chat_type="group",
            display_name="#dev",
        )
        for n in range(8):  # two sessions interleaved, usage and models summed
            await gateway.record_message(
                "main",
                role="assistant",
                content=f"answer {n}",
                usage={"input": n, "output": 2 * n, **({"totalTokens": 9} if n % 3 else {})},
                model=f"model-{n % 2}" if n % 4 else None,
            )
            await gateway.record_message(
                "discord:group:dev", role="user", content=f"dev {n}", channel="discord"
            )
        await gateway.patch_session("main", label="the main one")
        for n in range(5):
            await gateway.record_message("main", role="toolResult", content=f"tool {n}")
        await clock.advance(30)
        for n in range(4):
            await gateway.record_message("main", role="user", content=f"later {n}")
    finally:
        await gateway.close()


@pytest.mark.parametrize("urls", ["sqlite"], indirect=True)
async def test_imported_runs_leave_the_read_models_single_appends_leave(
    capsys: pytest.CaptureFixture[str],
    urls: tuple[str, str],
    tmp_path: Path,
    clock: VirtualClock,
) -> None:
    source, copy = urls
    await record_scenario(source)  # runs, exchanges, spawns, messages with provenance
    await record_singles(source, clock)
    exported = tmp_path / "log.jsonl"
    assert run_cli(capsys, "--store", source, "audit", "export", "-o", str(exported))[0] == 0
    code, _, err = run_cli(capsys, "--store", copy, "--json", "audit", "import", str(exported))
    assert code == 0, err

    source_log, source_models = stored_contents(source)
    copy_log, copy_models = stored_contents(copy)
    assert copy_log == source_log
    assert copy_models == source_models

    code, out, err = run_cli(capsys, "--store", copy, "--json", "audit", "rebuild", "--check")
    assert code == 0, err
    tables = json.loads(out)["tables"].values()
    assert not any(t["added"] or t["removed"] or t["changed"] for t in tables), out

    # Not vacuous: the import did replay runs as batches.
    store = EventSourcedStore(
        copy, kind_of=lambda state: GatewayConfig().key_rules.kind(state.key, state.chat_type)
    )
    try:
        audit = StoreAuditLog(store)
        loaded = [
            (n, audit.decode(record))
            for n, (record, _) in enumerate(audit.stored_records(audit.log_bounds()))
        ]
    finally:
        store.close()
    events, lines = runs_as_batches(loaded)
    batches = [e for e in events if isinstance(e, Session.MessagesAppended)]
    assert len(batches) >= 3
    assert max(len(batch.messages) for batch in batches) >= 12
    assert len(events) == len(lines) < len(loaded)
    assert sorted(lines) == lines

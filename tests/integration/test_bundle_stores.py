"""Bundles and checkpoints through the CLI on SQLite and PostgreSQL: a checkpoint signed on
the store anchors a session bundle and a whole-store export that verify alone, and a copy
imported from the export holds the same head and the checkpoint."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from audit_rig import distributed, populate, run_cli, seal_store
from sessionwire.testing import VirtualClock


async def test_bundles_from_either_store_verify_alone(
    capsys: pytest.CaptureFixture[str],
    urls: tuple[str, str],
    tmp_path: Path,
    clock: VirtualClock,
) -> None:
    source, copy = urls
    await populate(source, clock)
    seal_store(source)  # what the checkpoint signs is then the whole log
    key = tmp_path / "keys" / "signing.key"
    code, out, err = run_cli(
        capsys, "--store", source, "--json", "audit", "checkpoint", "--key", str(key)
    )
    assert code == 0, err
    made = json.loads(out)
    head = made["statement"]["log_hash"]
    public = made["public_key"]

    bundle, whole = tmp_path / "main.jsonl", tmp_path / "all.jsonl"
    for extra, target in ((("--session", "main"), bundle), ((), whole)):
        code, _, err = run_cli(
            capsys,
            "--store",
            source,
            "audit",
            "export",
            *extra,
            "--key",
            str(key),
            "-o",
            str(target),
        )
        assert code == 0, err
        code, out, _ = run_cli(
            capsys,
            "--json",
            "audit",
            "verify",
            str(target),
            "--trusted-key",
            public,
            "--expect-head",
            head,
        )
        report = json.loads(out)
        assert code == 0, report["findings"]
        assert report["unanchored"] == 0
        assert report["checkpoint"]["trusted"] is True

    code, out, err = run_cli(capsys, "--store", copy, "--json", "audit", "import", str(whole))
    assert code == 0, err
    (note,) = json.loads(out)["checkpoints"]
    verify_copy = ("--store", copy, "--json", "audit", "verify", "--expect-head", head)
    if distributed(source):
        # The checkpoint is version 4, and an import keeps none: the copy places its
        # records on its own shards (ADR 0067 §5). The copy verifies clean but for the
        # missing anchor, and a checkpoint signed on it anchors it again.
        assert made["statement"]["version"] == 4
        assert note.endswith("was not kept: it signs the shard heads of the store exported")
        code, out, _ = run_cli(capsys, *verify_copy, "--trusted-key", public)
        report = json.loads(out)
        assert code == 1
        assert [(f["kind"], f["detail"]) for f in report["findings"]] == [
            ("checkpoint", "the store holds no checkpoint to check against")
        ]
        code, out, err = run_cli(
            capsys, "--store", copy, "--json", "audit", "checkpoint", "--key", str(key)
        )
        assert code == 0, err
        resigned = json.loads(out)["statement"]
        assert (resigned["version"], resigned["log_hash"]) == (4, head)
        assert resigned["shards_root"] != made["statement"]["shards_root"]
    else:
        assert "was kept" in note, note
    code, out, _ = run_cli(capsys, *verify_copy, "--trusted-key", public)
    assert code == 0, out
    assert json.loads(out)["head"]["log_hash"] == head

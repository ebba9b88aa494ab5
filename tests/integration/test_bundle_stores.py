"""Bundles and checkpoints through the CLI on SQLite and PostgreSQL: a checkpoint signed on
the store anchors a session bundle and a whole-store export that verify alone, and a copy
imported from the export holds the same head and the checkpoint."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from audit_rig import populate, run_cli, seal_store
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

    code, _, err = run_cli(capsys, "--store", copy, "audit", "import", str(whole))
    assert code == 0, err
    code, out, _ = run_cli(
        capsys,
        "--store",
        copy,
        "--json",
        "audit",
        "verify",
        "--expect-head",
        head,
        "--trusted-key",
        public,
    )
    assert code == 0, out
    assert json.loads(out)["head"]["log_hash"] == head

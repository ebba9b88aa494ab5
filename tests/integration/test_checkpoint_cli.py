"""``sessionwire audit keygen | checkpoint`` and the anchored export: the key file is made
on first use, private (0600 in a 0700 folder), found by option, environment or default,
refused when others can read it; checkpoints are printed, recorded and anchor exports."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import pytest
from audit_rig import run_cli
from sessionwire.adapters.cli.checkpoint_key import KEY_ENV


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


@pytest.fixture
def store(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> str:
    url = f"sqlite:///{tmp_path}/audit.db"
    assert run_cli(capsys, "--store", url, "record", "main", "hello")[0] == 0
    return url


def test_the_key_is_made_on_first_use_private_and_kept(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    key = tmp_path / "keys" / "signing.key"
    code, out, _ = run_cli(capsys, "--json", "audit", "keygen", "--key", str(key))
    assert code == 0
    made = json.loads(out)
    assert made["created"] is True
    assert made["public_key"].startswith("ed25519:")
    assert (mode(key.parent), mode(key)) == (0o700, 0o600)
    assert key.read_text().startswith("-----BEGIN PRIVATE KEY-----")
    code, out, _ = run_cli(capsys, "--json", "audit", "keygen", "--key", str(key))
    again = json.loads(out)
    assert (again["created"], again["public_key"]) == (False, made["public_key"])


def test_the_key_path_comes_from_the_environment_or_the_data_dir(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    code, out, _ = run_cli(capsys, "--json", "audit", "keygen")
    assert code == 0
    default = Path(os.environ["XDG_DATA_HOME"]) / "sessionwire" / "keys" / "checkpoint.key"
    assert json.loads(out)["key_file"] == str(default)
    monkeypatch.setenv(KEY_ENV, str(tmp_path / "env.key"))
    code, out, _ = run_cli(capsys, "--json", "audit", "keygen")
    assert json.loads(out)["key_file"] == str(tmp_path / "env.key")
    assert mode(tmp_path / "env.key") == 0o600


def test_a_key_file_others_can_read_is_refused(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, store: str
) -> None:
    key = tmp_path / "signing.key"
    assert run_cli(capsys, "audit", "keygen", "--key", str(key))[0] == 0
    key.chmod(0o644)
    code, _, err = run_cli(capsys, "--store", store, "audit", "checkpoint", "--key", str(key))
    assert code == 2
    assert "open to other users" in err


def test_a_checkpoint_is_printed_recorded_and_anchors_the_next_export(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, store: str
) -> None:
    key = tmp_path / "signing.key"
    code, out, err = run_cli(
        capsys, "--store", store, "--json", "audit", "checkpoint", "--key", str(key)
    )
    assert code == 0, err
    made = json.loads(out)
    assert made["statement"]["log_size"] == 2
    assert made["streams"] == 1
    _, public, _ = run_cli(capsys, "audit", "keygen", "--key", str(key))
    assert made["public_key"] == public.strip()

    # No key configured for the export: the recorded checkpoint anchors it.
    bundle = tmp_path / "main.jsonl"
    code, _, err = run_cli(
        capsys, "--store", store, "audit", "export", "--session", "main", "-o", str(bundle)
    )
    assert code == 0, err
    lines = [json.loads(line) for line in bundle.read_text().splitlines()]
    (checkpoint,) = [line for line in lines if line["type"] == "checkpoint"]
    assert checkpoint["statement"] == made["statement"]
    assert [line["type"] for line in lines].count("proof") == 1
    code, out, _ = run_cli(
        capsys,
        "--json",
        "audit",
        "verify",
        str(bundle),
        "--trusted-key",
        public.strip(),
        "--expect-head",
        made["statement"]["log_hash"],
    )
    assert code == 0, out
    assert json.loads(out)["anchored"] == 2


def test_an_export_with_a_key_checkpoints_now_and_still_imports(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, store: str
) -> None:
    key = tmp_path / "signing.key"
    exported = tmp_path / "log.jsonl"
    code, _, err = run_cli(
        capsys, "--store", store, "audit", "export", "--key", str(key), "-o", str(exported)
    )
    assert code == 0, err
    assert key.exists()
    types = [json.loads(line)["type"] for line in exported.read_text().splitlines()]
    # The one session's members line: the file alone recomputes sessions_root (ADR 0041).
    assert types == ["header", "event", "event", "checkpoint", "members", "end"]
    assert run_cli(capsys, "audit", "verify", str(exported))[0] == 0
    copy = f"sqlite:///{tmp_path}/copy.db"
    code, out, err = run_cli(capsys, "--store", copy, "--json", "audit", "import", str(exported))
    assert code == 0, err
    (note,) = json.loads(out)["checkpoints"]
    assert "was kept" in note

    # A checkpoint changed on the way is not kept; the log (checked on its own) still is.
    forged = tmp_path / "forged.jsonl"
    forged.write_text(exported.read_text().replace('"log_size":2', '"log_size":1'))
    other = f"sqlite:///{tmp_path}/other.db"
    code, out, err = run_cli(capsys, "--store", other, "--json", "audit", "import", str(forged))
    assert code == 0, err
    (note,) = json.loads(out)["checkpoints"]
    assert "not kept: its signature does not hold" in note
    _, public, _ = run_cli(capsys, "audit", "keygen", "--key", str(key))
    code, out, _ = run_cli(
        capsys, "--store", other, "--json", "audit", "verify", "--trusted-key", public.strip()
    )
    assert code == 1
    assert "no checkpoint" in json.loads(out)["findings"][0]["detail"]


def test_nothing_to_sign_in_an_empty_store(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    from sessionwire import SyncGateway

    SyncGateway.open(store=f"sqlite:///{tmp_path}/empty.db").close()  # made, nothing in it
    code, _, err = run_cli(
        capsys,
        "--store",
        f"sqlite:///{tmp_path}/empty.db",
        "audit",
        "checkpoint",
        "--key",
        str(tmp_path / "k"),
    )
    assert code == 1
    assert "nothing to sign" in err


def test_events_after_the_checkpoint_are_reported_unanchored(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, store: str
) -> None:
    key = tmp_path / "signing.key"
    assert run_cli(capsys, "--store", store, "audit", "checkpoint", "--key", str(key))[0] == 0
    assert run_cli(capsys, "--store", store, "record", "main", "after the checkpoint")[0] == 0
    for extra in ((), ("--session", "main")):
        exported = tmp_path / "file.jsonl"
        code, _, err = run_cli(
            capsys, "--store", store, "audit", "export", *extra, "-o", str(exported)
        )
        assert code == 0, err
        code, out, _ = run_cli(capsys, "--json", "audit", "verify", str(exported))
        report = json.loads(out)
        assert (code, report["anchored"], report["unanchored"]) == (0, 2, 1), extra
        code, out, _ = run_cli(
            capsys, "--json", "audit", "verify", str(exported), "--require-anchored"
        )
        assert code == 1
        assert [f["kind"] for f in json.loads(out)["findings"]] == ["unanchored"]
        code, out, _ = run_cli(capsys, "audit", "verify", str(exported))
        assert "1 unanchored (after the checkpoint)" in out

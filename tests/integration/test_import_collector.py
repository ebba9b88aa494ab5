"""``audit import`` and ``import openclaw`` run their bulk work with Python's cyclic
garbage collector paused (adapters/cli/context.py ``collector_paused``) and leave it as
they found it."""

from __future__ import annotations

import gc
from pathlib import Path
from typing import Any

import pytest
import sessionwire.adapters.cli.audit_integrity as audit_cli
import sessionwire.adapters.cli.imports as imports_cli
from command_line import run_in_process
from test_import_progress import export_of, openclaw_dir


def test_audit_import_pauses_the_collector_while_it_works(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    exported = export_of(tmp_path, 5)
    seen: list[bool] = []
    real = audit_cli.import_export

    def watched(*args: Any, **kwargs: Any) -> int:
        seen.append(gc.isenabled())
        return real(*args, **kwargs)

    monkeypatch.setattr(audit_cli, "import_export", watched)
    assert gc.isenabled()
    ran = run_in_process("--store", f"sqlite:///{tmp_path}/a.db", "audit", "import", str(exported))
    assert ran.returncode == 0, ran.stderr
    assert seen == [False]
    assert gc.isenabled()


def test_import_openclaw_pauses_the_collector_while_it_works(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    state = openclaw_dir(tmp_path / "state", 5)
    seen: list[bool] = []
    real = imports_cli.import_sessions

    def watched(*args: Any, **kwargs: Any) -> Any:
        seen.append(gc.isenabled())
        return real(*args, **kwargs)

    monkeypatch.setattr(imports_cli, "import_sessions", watched)
    ran = run_in_process("--store", f"sqlite:///{tmp_path}/a.db", "import", "openclaw", str(state))
    assert ran.returncode == 0, ran.stderr
    assert seen == [False]
    assert gc.isenabled()


def test_a_failed_import_leaves_the_collector_running(tmp_path: Path) -> None:
    bad = tmp_path / "bad.jsonl"
    bad.write_text("not an export\n")
    ran = run_in_process("--store", f"sqlite:///{tmp_path}/a.db", "audit", "import", str(bad))
    assert ran.returncode != 0
    assert gc.isenabled()

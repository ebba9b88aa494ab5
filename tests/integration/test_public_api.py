"""The public API is the package top and ``sessionwire.testing`` (contract §6 decision 19),
and the docs use nothing else."""

from __future__ import annotations

import re
from importlib import metadata
from pathlib import Path

import pytest
import sessionwire
import sessionwire.testing

ROOT = Path(__file__).resolve().parents[2]
TOP = {
    "Gateway",
    "SyncGateway",
    "GatewayConfig",
    "AgentRuntime",
    "RunRequest",
    "RunReply",
    "ChannelDelivery",
    "Delivery",
    "__version__",
}
TESTING = {"ScriptedRuntime", "VirtualClock", "CapturingDelivery"}


def test_the_decision_19_names_import_from_the_package_top() -> None:
    namespace: dict[str, object] = {}
    exec(f"from sessionwire import {', '.join(sorted(TOP))}", namespace)
    assert set(namespace) >= TOP
    assert set(sessionwire.__all__) >= TOP
    assert set(dir(sessionwire)) >= TOP
    from sessionwire.application.ports.runtime import AgentRuntime

    assert namespace["AgentRuntime"] is AgentRuntime


def test_every_name_in_all_resolves() -> None:
    for name in sessionwire.__all__:
        assert getattr(sessionwire, name) is not None, name
    for name in sessionwire.testing.__all__:
        assert getattr(sessionwire.testing, name) is not None, name
    assert set(sessionwire.testing.__all__) >= TESTING


def test_an_unknown_name_is_an_attribute_error() -> None:
    with pytest.raises(AttributeError, match="no attribute 'Gatway'"):
        _ = sessionwire.Gatway  # type: ignore[attr-defined]


def test_version_comes_from_the_installed_metadata() -> None:
    assert sessionwire.__version__ == metadata.version("sessionwire")


def test_version_of_a_never_installed_tree_says_unknown(monkeypatch: pytest.MonkeyPatch) -> None:
    def missing(name: str) -> str:
        raise metadata.PackageNotFoundError(name)

    monkeypatch.setattr(metadata, "version", missing)
    assert sessionwire.__version__ == "0+unknown"


DEEP_IMPORT = re.compile(r"^\s*(from|import)\s+sessionwire\.(?!testing\b)\w+", re.MULTILINE)


@pytest.mark.parametrize(
    "doc", [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))], ids=lambda p: p.name
)
def test_docs_import_only_the_public_modules(doc: Path) -> None:
    deep = [match.group(0).strip() for match in DEEP_IMPORT.finditer(doc.read_text("utf-8"))]
    assert deep == [], f"{doc.name} imports internal modules; use sessionwire / sessionwire.testing"

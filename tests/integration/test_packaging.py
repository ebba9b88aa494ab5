"""The package list in pyproject.toml names every folder, of code or of data (a mapped
layout is not discovered by setuptools, so a code folder left out would be missing from
`pip install .`, and a data folder left out is a BuildBackendWarning at every build).
tests/e2e/test_pip_install.py builds the wheel."""

from __future__ import annotations

import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _package_name(folder: Path) -> str:
    top, *rest = folder.relative_to(ROOT).parts
    base = "sessionwire" if top == "public" else f"sessionwire.{top}"
    return ".".join([base, *rest])


def test_every_folder_is_a_listed_package() -> None:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text("utf-8"))
    listed = set(config["tool"]["setuptools"]["packages"])
    folders = {
        _package_name(folder)
        for top in ("public", "domain", "application", "adapters")
        for folder in [ROOT / top, *(ROOT / top).rglob("*")]
        if folder.is_dir()
        and "__pycache__" not in folder.parts
        and any(not item.is_dir() for item in folder.iterdir())
    }
    assert folders - listed == set(), "add these to [tool.setuptools] packages"
    assert listed - folders == set(), "these listed packages have no folder"


def test_nothing_at_the_root_shadows_the_package() -> None:
    assert not (ROOT / "sessionwire").exists()

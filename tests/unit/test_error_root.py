"""One root for every error sessionwire raises (issue 24): an embedder catches
``sessionwire.SessionwireError`` and knows the error is ours; each keeps its built-in base."""

from __future__ import annotations

import importlib
import inspect
import pkgutil

import sessionwire
from sessionwire import ConfigError, InvalidSessionKey, SessionwireError


def _package_modules() -> list[str]:
    names = []
    for info in pkgutil.walk_packages(sessionwire.__path__, "sessionwire."):
        # The demo's runner and the CLI import click-only pieces; all import here.
        names.append(info.name)
    return names


def test_every_error_class_the_package_defines_derives_from_the_root() -> None:
    outside = []
    for name in _package_modules():
        module = importlib.import_module(name)
        for _, cls in inspect.getmembers(module, inspect.isclass):
            if cls.__module__ != name or not issubclass(cls, BaseException):
                continue
            if not issubclass(cls, SessionwireError):
                outside.append(f"{name}.{cls.__qualname__}")
    assert outside == []


def test_errors_keep_their_builtin_bases() -> None:
    assert issubclass(ConfigError, ValueError)
    assert issubclass(InvalidSessionKey, ValueError)
    assert issubclass(ConfigError, SessionwireError)
    assert "SessionwireError" in sessionwire.__all__

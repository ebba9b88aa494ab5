"""``SyncGateway`` is ``Gateway`` without ``await`` (ADR 0043): each public method of the
one has its twin in the other, taking the same parameters, so a script and an async host
call the gateway alike and a method added to ``Gateway`` cannot be forgotten here."""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

from sessionwire import Gateway, SyncGateway

# Where the two differ on purpose: each opens its own way (an event loop of its own for
# the sync one), and a context manager is the sync gateway's alone.
OWN_WAYS = {"open", "__enter__", "__exit__"}


def public_methods(cls: type) -> dict[str, Callable[..., Any]]:
    """The class's public functions, as defined (a property is not one)."""
    found = {}
    for name, member in vars(cls).items():
        if isinstance(member, (classmethod, staticmethod)):
            member = member.__func__
        if callable(member) and (not name.startswith("_") or name in OWN_WAYS):
            found[name] = member
    return found


def parameters(method: Callable[..., Any]) -> list[tuple[str, Any, Any, Any]]:
    """Each parameter's name, kind, default and annotation, ``self`` left out (its
    annotation names the class), as ``inspect`` reads them through a generated twin."""
    signature = inspect.signature(method)
    return [
        (p.name, p.kind, p.default, p.annotation)
        for p in signature.parameters.values()
        if p.name != "self"
    ]


def test_every_gateway_method_has_a_sync_twin_and_back() -> None:
    asynchronous = set(public_methods(Gateway)) - OWN_WAYS
    synchronous = set(public_methods(SyncGateway)) - OWN_WAYS
    assert asynchronous == synchronous
    # The comparison sees every method of both (a filter that dropped them all would
    # make it trivially equal).
    assert {"call_tool", "record_message", "subscribe", "close"} <= asynchronous


def test_each_twin_takes_the_same_parameters() -> None:
    asynchronous = public_methods(Gateway)
    synchronous = public_methods(SyncGateway)
    differing = {
        name: (parameters(asynchronous[name]), parameters(synchronous[name]))
        for name in set(asynchronous) - OWN_WAYS
        if parameters(asynchronous[name]) != parameters(synchronous[name])
    }
    assert differing == {}


def test_a_coroutine_twin_answers_what_the_coroutine_answers() -> None:
    """The sync twin of a coroutine returns what awaiting it returns (its annotation),
    not a coroutine: ``subscribe`` alone differs, an iterator for an async one."""
    for name, method in public_methods(Gateway).items():
        if name in OWN_WAYS or not inspect.iscoroutinefunction(method):
            continue
        twin = public_methods(SyncGateway)[name]
        assert (
            inspect.signature(twin).return_annotation == inspect.signature(method).return_annotation
        ), name


def test_a_script_calls_the_twins_as_it_would_await_the_coroutines() -> None:
    with SyncGateway.open() as gateway:
        recorded = gateway.record_message("agent:main:main", role="user", content="hello")
        assert recorded["sessionKey"] == "agent:main:main"
        # call_tool takes run_token as Gateway.call_tool does (the hand-written twin
        # had dropped it): a token of no run in flight is refused, not a TypeError.
        refused = gateway.call_tool("agent:main:main", "sessions_list", {}, run_token="no-such-run")
        assert refused["status"] == "forbidden"
        # A keyword-only parameter stays keyword-only through the generated twin.
        assert gateway.runs(session_key="agent:main:main", limit=5) == {"runs": []}
        assert gateway.session_as_of("agent:main:main", version=1).version == 1

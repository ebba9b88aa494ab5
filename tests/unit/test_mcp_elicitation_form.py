"""The MCP elicitation form of a waiting run (adapters/mcp/elicitation.py): which declared
capabilities take a form, and the schema the run's options make."""

from __future__ import annotations

from mcp import types
from sessionwire.adapters.mcp.elicitation import answer_schema, asks, can_elicit


def test_form_elicitation_is_declared_by_form_or_by_an_empty_capability() -> None:
    def declared(capability: types.ElicitationCapability | None) -> types.ClientCapabilities:
        return types.ClientCapabilities(elicitation=capability)

    assert can_elicit(declared(types.ElicitationCapability()))
    form = types.FormElicitationCapability()
    assert can_elicit(declared(types.ElicitationCapability(form=form)))
    url_only = types.ElicitationCapability(url=types.UrlElicitationCapability())
    assert not can_elicit(declared(url_only))
    assert not can_elicit(declared(None))
    assert not can_elicit(None)


def test_options_are_the_enum_and_free_text_a_non_empty_string() -> None:
    chosen = answer_schema(["yes", "no"])
    assert chosen["required"] == ["answer"]
    assert chosen["properties"]["answer"] == {
        "type": "string",
        "title": "Answer",
        "enum": ["yes", "no"],
    }
    free = answer_schema(None)
    assert free["properties"]["answer"] == {"type": "string", "title": "Answer", "minLength": 1}


def test_only_a_waiting_run_is_asked_for() -> None:
    assert asks({"status": "input_required", "runId": "r1", "prompt": "?"})
    assert not asks({"status": "accepted", "runId": "r1"})
    assert not asks({"status": "input_required"})

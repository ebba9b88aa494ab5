"""Tool JSON Schemas (openclaw-conformance §A) and their agreement with the parameter models."""

from __future__ import annotations

from sessionwire import Gateway
from sessionwire.application.gateway import TOOLS


async def test_schemas_are_plain_objects_with_number_types(gateway: Gateway) -> None:
    # Which tools, in which order: test_tool_registry.py.
    schemas = {s["name"]: s for s in gateway.tool_schemas()}
    for schema in schemas.values():
        parameters = schema["parameters"]
        assert parameters["type"] == "object"
        assert "anyOf" not in parameters
        assert "oneOf" not in parameters
        assert schema["description"]
    assert schemas["sessions_history"]["parameters"]["properties"]["limit"]["type"] == "number"
    for name in ("limit", "activeMinutes", "messageLimit"):
        assert schemas["sessions_list"]["parameters"]["properties"][name]["type"] == "number"
    assert schemas["sessions_history"]["parameters"]["required"] == ["sessionKey"]
    assert schemas["subagents"]["parameters"]["properties"]["recentMinutes"]["type"] == "number"
    assert (
        schemas["sessions_send"]["parameters"]["properties"]["timeoutSeconds"]["type"] == "number"
    )
    assert schemas["sessions_send"]["parameters"]["required"] == ["message"]
    spawn = schemas["sessions_spawn"]["parameters"]["properties"]
    assert spawn["runTimeoutSeconds"]["type"] == "number"
    assert spawn["timeoutSeconds"]["type"] == "number"
    assert spawn["thinking"]["type"] == "string"
    yielding = schemas["sessions_yield"]["parameters"]
    assert yielding["properties"]["timeoutSeconds"]["type"] == "number"
    assert yielding["properties"]["waitFor"]["enum"] == ["all", "any"]
    assert "required" not in yielding


def test_schema_properties_match_the_parameter_models() -> None:
    from sessionwire.application.tools.schemas import tool_parameters

    for name, (params_class, _) in TOOLS.items():
        assert set(tool_parameters(name)["properties"]) == set(params_class.model_fields)

"""JSON Schemas of the tools, for LLM function calling, generated from their parameter
models (``params.py``, ``run_params.py``) by pydantic, in the dialect OpenClaw's tools are
offered in.

Numbers are typed ``number`` (never ``integer``) and no schema has an ``anyOf``/``oneOf``
(an optional parameter is its type; absent means unset): some model providers reject
either (openclaw-conformance.md §A). No titles and no defaults: a parameter's description
says its default. Each model's fields are its schema's properties, in order; what a
schema says beyond a field's type (``minimum``, ``maxLength``, ``enum``) is the field's
``wire(...)`` annotation. A schema is built on first use, not at import: a process that
lists no tools (the CLI's reads) never builds one.
"""

from __future__ import annotations

from functools import cache
from typing import Any

from pydantic.json_schema import GenerateJsonSchema, JsonSchemaValue
from pydantic_core import core_schema
from sessionwire.application.tools.params import ToolParams
from sessionwire.application.tools.registry import REGISTRY, ToolSpec

# Each schema's keys in the order the hand-written schemas had them (the JSON served by
# GET /v1/tools and MCP's tools/list reads the same as before they were generated).
OBJECT_KEYS = ("type", "properties", "additionalProperties", "required")
PROPERTY_KEYS = ("type", "items", "enum", "minimum", "maxLength", "description")


class ToolSchema(GenerateJsonSchema):
    """pydantic's JSON Schema generator, writing OpenClaw's tool schema dialect."""

    def int_schema(self, schema: core_schema.IntSchema) -> JsonSchemaValue:
        return {"type": "number"}

    def nullable_schema(self, schema: core_schema.NullableSchema) -> JsonSchemaValue:
        # ``X | None`` is ``X``: a parameter left out is None, and null is never asked for.
        return self.generate_inner(schema["schema"])

    def default_schema(self, schema: core_schema.WithDefaultSchema) -> JsonSchemaValue:
        return self.generate_inner(schema["schema"])

    def frozenset_schema(self, schema: core_schema.FrozenSetSchema) -> JsonSchemaValue:
        # A set parameter is read from a JSON array; a repeated item is no error.
        items = schema.get("items_schema")
        return {"type": "array", "items": self.generate_inner(items) if items else {}}

    def field_title_should_be_set(self, schema: Any) -> bool:
        return False

    def model_schema(self, schema: core_schema.ModelSchema) -> JsonSchemaValue:
        generated = super().model_schema(schema)
        # A model's title and docstring are not the tool's: its description is its own.
        generated.pop("title", None)
        generated.pop("description", None)
        return generated


def _ordered(schema: dict[str, Any], keys: tuple[str, ...]) -> dict[str, Any]:
    known = {key: schema[key] for key in keys if key in schema}
    ordered = known | {key: value for key, value in schema.items() if key not in known}
    if isinstance(items := ordered.get("items"), dict):  # pydantic sorts an array's items
        ordered["items"] = _ordered(items, PROPERTY_KEYS)
    return ordered


def parameters_schema(params: type[ToolParams]) -> dict[str, Any]:
    """The JSON Schema of one tool's parameters."""
    schema = params.model_json_schema(schema_generator=ToolSchema)
    properties = schema.get("properties", {})
    schema["properties"] = {
        name: _ordered(prop, PROPERTY_KEYS) for name, prop in properties.items()
    }
    return _ordered(schema, OBJECT_KEYS)


@cache
def tool_parameters(name: str) -> dict[str, Any]:
    """The parameters' schema of the registered tool ``name`` (built once)."""
    return parameters_schema(REGISTRY[name].params_model)


def tool_schema(spec: ToolSpec) -> dict[str, Any]:
    return {
        "name": spec.name,
        "description": spec.description,
        "parameters": tool_parameters(spec.name),
    }


def tool_schemas() -> list[dict[str, Any]]:
    """Every registered tool's name, description and parameters' schema, in order."""
    return [tool_schema(spec) for spec in REGISTRY]

"""The OpenAPI document with its parameters described as they travel.

FastAPI writes an optional parameter (``str | None = None``) as ``anyOf: [string,
null]``. A query string or a header cannot carry a JSON null: an optional parameter is
one left out (``required: false``). The ``null`` branch made a client (or a fuzzer) read
a value the server never sees: schemathesis turned it into an array whose one element
reached the server as a valid string, and called the 200 a wrong answer (issue 24).
"""

from typing import Any

from fastapi import FastAPI

NULL = {"type": "null"}


def without_null(schema: dict[str, Any]) -> dict[str, Any]:
    """``anyOf: [X, null]`` as X, its title and description kept; any other schema as is."""
    branches = schema.get("anyOf")
    if not isinstance(branches, list) or NULL not in branches:
        return schema
    rest = [branch for branch in branches if branch != NULL]
    annotations = {key: value for key, value in schema.items() if key != "anyOf"}
    if len(rest) == 1:
        return {**rest[0], **annotations}
    return {"anyOf": rest, **annotations}


def parameters_as_sent(document: dict[str, Any]) -> dict[str, Any]:
    """The document (changed in place) with no path, query, header or cookie parameter
    that admits null."""
    for operations in document.get("paths", {}).values():
        for operation in operations.values():
            for parameter in operation.get("parameters", []):
                if "schema" in parameter:
                    parameter["schema"] = without_null(parameter["schema"])
    return document


class WireDocumentedApp(FastAPI):
    """A FastAPI app whose ``/openapi.json`` describes parameters as they are sent."""

    def openapi(self) -> dict[str, Any]:
        if self.openapi_schema is None:
            self.openapi_schema = parameters_as_sent(super().openapi())
        return self.openapi_schema

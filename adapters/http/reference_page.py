"""``GET /docs``: the OpenAPI document as a page to read, on the server itself.

FastAPI's own ``/docs`` is Swagger UI, a page that loads its scripts and styles from a
CDN at every visit: a gateway holding conversations would hand its operators' browsers
to a third party's scripts, and show nothing on a machine without internet. This page
is plain HTML made from the same document (every route, its method, summary, whether it
takes a token, and the schema of its body), with no script at all; ``/openapi.json``
stays the machine-readable original that client generators read.
"""

from __future__ import annotations

import json
from html import escape
from typing import Any

from starlette.responses import HTMLResponse

# Nothing but this page's own inline style: no script, no frame, no remote fetch.
PAGE_HEADERS = {
    "Content-Security-Policy": (
        "default-src 'none'; style-src 'unsafe-inline'; base-uri 'none'; "
        "form-action 'none'; frame-ancestors 'none'"
    ),
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
}
METHOD_ORDER = ("get", "post", "put", "patch", "delete")
STYLE = (
    "body{font-family:system-ui,sans-serif;max-width:70rem;margin:2rem auto;padding:0 1rem}"
    "code,pre{font-family:ui-monospace,monospace}"
    "pre{background:#f4f4f4;padding:.5rem;overflow:auto;max-height:20rem}"
    "section{border-top:1px solid #ddd;padding:.5rem 0}"
    ".method{font-weight:bold;text-transform:uppercase;margin-right:.5rem}"
)


def reference_page(document: dict[str, Any]) -> HTMLResponse:
    """The page for ``document`` (the app's OpenAPI document)."""
    info = document.get("info", {})
    title = f"{info.get('title', 'API')} {info.get('version', '')}".strip()
    parts = [
        "<!doctype html><html lang='en'><head><meta charset='utf-8'>",
        f"<title>{escape(title)}: HTTP API</title><style>{STYLE}</style></head><body>",
        f"<h1>{escape(title)}: HTTP API</h1>",
        f"<p>{escape(info.get('summary', ''))}. The machine-readable document: "
        "<a href='/openapi.json'><code>/openapi.json</code></a>. Routes marked "
        "<em>token</em> take <code>Authorization: Bearer TOKEN</code>.</p>",
    ]
    for path, operations in document.get("paths", {}).items():
        for method in METHOD_ORDER:
            operation = operations.get(method)
            if operation is not None:
                parts.append(_operation(method, path, operation))
    parts.append("</body></html>")
    return HTMLResponse("".join(parts), headers=PAGE_HEADERS)


def _operation(method: str, path: str, operation: dict[str, Any]) -> str:
    anchor = escape(operation.get("operationId", f"{method}-{path}"), quote=True)
    token = " <em>token</em>" if operation.get("security") else ""
    html = [
        f"<section id='{anchor}'><h2><span class='method'>{escape(method)}</span>"
        f"<code>{escape(path)}</code>{token}</h2>",
        f"<p>{escape(operation.get('summary', ''))}</p>",
    ]
    description = operation.get("description")
    if description:
        html.append(f"<p>{escape(description)}</p>")
    parameters = operation.get("parameters", [])
    if parameters:
        html.append("<ul>")
        for parameter in parameters:
            required = " (required)" if parameter.get("required") else ""
            html.append(
                f"<li><code>{escape(parameter.get('name', ''))}</code> in "
                f"{escape(parameter.get('in', ''))}{required}</li>"
            )
        html.append("</ul>")
    body = operation.get("requestBody", {}).get("content", {}).get("application/json")
    if body is not None:
        schema = json.dumps(body.get("schema", {}), indent=2)
        html.append(f"<details><summary>request body</summary><pre>{escape(schema)}</pre>")
        html.append("</details>")
    html.append("</section>")
    return "".join(html)


__all__ = ["reference_page"]

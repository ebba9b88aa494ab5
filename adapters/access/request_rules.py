"""Rules every route of the HTTP gateway applies to a request before its handler runs:
the caller is authenticated, a posted body is JSON, and no query parameter goes unread."""

from collections.abc import Callable
from typing import Any

from fastapi import Depends, Request
from sessionwire.adapters.access.auth import authenticated
from sessionwire.adapters.access.errors import ApiError


async def json_content(request: Request) -> None:
    # One rule for every POST: a body is JSON and says so. (FastAPI would otherwise
    # read an unlabelled body as "no body" and answer with a puzzling 422.)
    declared = request.headers.get("content-type", "")
    media = declared.split(";")[0].strip().lower()
    if media == "application/json" or media.endswith("+json"):
        return
    if not await request.body():
        return
    raise ApiError(
        415,
        "unsupported_media_type",
        f"send the body as JSON with Content-Type: application/json (got {declared!r})",
    )


def only_query(*names: str) -> Callable[[Request], None]:
    """Refuse a query parameter the route does not take: as the document says (a
    misspelt filter would otherwise widen a listing silently)."""

    def check(request: Request) -> None:
        unknown = sorted(set(request.query_params) - set(names))
        if unknown:
            known = ", ".join(names) or "none"
            raise ApiError(
                400,
                "bad_request",
                f"unknown query parameter {unknown[0]!r} (parameters: {known})",
            )

    return check


AUTH: list[Any] = [Depends(authenticated)]
"""A route for any caller with a valid token."""
POSTED: list[Any] = [Depends(authenticated), Depends(json_content)]
"""A POST route: a valid token and a JSON body."""

"""One JSON shape for every HTTP error: ``{"error": {"code", "message"}}`` (ADR 0007).

The error models, the status codes' stable names, and the app's exception handlers; every
route module and the Gatekeeper answer through ``error_response`` or raise ``ApiError``.
"""

import traceback
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from pydantic import BaseModel
from sessionwire.application.library_logging import library_logger
from sessionwire.application.ports.store import StoreDamaged, StoreInUse
from sessionwire.application.tool_calls import STORE_HELD
from sessionwire.domain.errors import SessionwireError
from starlette.exceptions import HTTPException as StarletteHTTPException

log = library_logger("sessionwire.http")


class ErrorDetail(BaseModel):
    code: str
    message: str


class ErrorBody(BaseModel):
    """Every non-2xx answer: a stable ``code`` for programs, a ``message`` for people."""

    error: ErrorDetail


class ApiError(SessionwireError):
    def __init__(
        self, status: int, code: str, message: str, headers: dict[str, str] | None = None
    ) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message
        self.headers = headers


STATUS_CODES = {
    400: "bad_request",
    401: "unauthorized",
    403: "forbidden",
    404: "not_found",
    405: "method_not_allowed",
    409: "conflict",
    408: "request_timeout",
    413: "too_large",
    415: "unsupported_media_type",
    422: "invalid_request",
    429: "too_many_requests",
    500: "internal",
    503: "unavailable",
}


# What a client is told of a damaged store: nothing of the file; the log has what SQLite
# found, and `serve` refuses to start on such a file.
STORE_DAMAGED = "the store is damaged; nothing was read or written (the operator's log says more)"


def error_response(
    status: int, code: str, message: str, headers: dict[str, str] | None = None
) -> JSONResponse:
    body = ErrorBody(error=ErrorDetail(code=code, message=message))
    return JSONResponse(body.model_dump(), status_code=status, headers=headers)


def error_responses(*statuses: int) -> dict[int | str, dict[str, Any]]:
    """The OpenAPI ``responses`` of a route that may answer with these error statuses."""
    return {
        status: {"model": ErrorBody, "description": STATUS_CODES[status]} for status in statuses
    }


def add_error_handlers(app: FastAPI, *, query_is_bad_request: frozenset[str]) -> None:
    """Answer every error in the one shape. A bad query parameter of a path in
    ``query_is_bad_request`` is 400 (a filter of a listing, as a bad argument of the
    gateway's call is a ValueError); any other invalid request is 422."""

    @app.exception_handler(ApiError)
    async def api_error(_: Request, error: ApiError) -> JSONResponse:
        return error_response(error.status, error.code, error.message, error.headers)

    @app.exception_handler(StarletteHTTPException)
    async def http_error(_: Request, error: StarletteHTTPException) -> JSONResponse:
        code = STATUS_CODES.get(error.status_code, "http_error")
        headers = dict(error.headers) if error.headers else None
        return error_response(error.status_code, code, str(error.detail), headers)

    @app.exception_handler(RequestValidationError)
    async def invalid_request(request: Request, error: RequestValidationError) -> JSONResponse:
        problems = list(error.errors())
        if any(problem.get("type") == "json_invalid" for problem in problems):
            return error_response(400, "invalid_json", "the body is not valid JSON")
        first = problems[0] if problems else {}
        location = tuple(first.get("loc", ()))
        message = str(first.get("msg", "invalid request"))
        if location[:1] == ("query",) and request.url.path in query_is_bad_request:
            name = ".".join(str(part) for part in location[1:])
            return error_response(400, "bad_request", f"{name}: {message}")
        where = ".".join(str(part) for part in location if part != "body")
        return error_response(422, "invalid_request", f"{where}: {message}" if where else message)

    @app.exception_handler(StoreInUse)
    async def store_held(request: Request, held: StoreInUse) -> JSONResponse:
        # As a tool call answers beside an SQLite file's live writer (decision 20): the
        # holder's path, host and pid go to the log, not to the caller.
        log.warning("request refused: the store has another writer", path=request.url.path)
        return error_response(409, "store_held", STORE_HELD)

    @app.exception_handler(StoreDamaged)
    async def store_damaged(request: Request, damaged: StoreDamaged) -> JSONResponse:
        log.error("request failed: the store is damaged", path=request.url.path, found=str(damaged))
        return error_response(503, "store_damaged", STORE_DAMAGED)

    @app.exception_handler(Exception)
    async def internal_error(request: Request, error: Exception) -> JSONResponse:
        # Where it failed, never with what: no locals, no exception text (either may hold
        # the body or a token), only the error's type and the stack's file:line list.
        frames = traceback.extract_tb(error.__traceback__)
        log.error(
            "request failed",
            path=request.url.path,
            error=type(error).__name__,
            frames=[f"{frame.filename}:{frame.lineno} {frame.name}" for frame in frames[-8:]],
        )
        return error_response(500, "internal", f"internal error: {type(error).__name__}")

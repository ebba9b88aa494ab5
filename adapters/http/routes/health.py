"""Unauthenticated routes: liveness, readiness, and the API reference page."""

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse, JSONResponse
from pydantic import BaseModel
from sessionwire.adapters.access.errors import error_response, error_responses, log
from sessionwire.adapters.bootstrap import Gateway
from sessionwire.adapters.http.reference_page import reference_page


class Health(BaseModel):
    status: str


def health_router(gateway: Gateway) -> APIRouter:
    router = APIRouter()

    @router.get("/healthz", response_model=Health, tags=["health"])
    async def healthz() -> Health:
        """The process is up and answering."""
        return Health(status="ok")

    @router.get("/readyz", response_model=Health, responses=error_responses(503), tags=["health"])
    async def readyz() -> Health | JSONResponse:
        """The store answers a query."""
        try:
            await gateway.served.sealed_position()
        except Exception as error:
            log.warning("store not reachable", error=str(error))
            return error_response(503, "unavailable", f"store not reachable: {error}")
        return Health(status="ready")

    @router.get("/docs", include_in_schema=False)
    async def api_reference(request: Request) -> HTMLResponse:
        """The OpenAPI document as a page to read, with no script (reference_page.py)."""
        return reference_page(request.app.openapi())

    return router

"""``GET /metrics`` (ADR 0019): Prometheus text, for operator tokens only."""

from typing import Annotated

from fastapi import APIRouter, Depends
from fastapi.responses import Response
from sessionwire.adapters.access.auth import authenticated
from sessionwire.adapters.access.errors import ApiError
from sessionwire.adapters.access.tokens import Grant
from sessionwire.adapters.bootstrap import Gateway
from sessionwire.adapters.telemetry.prometheus import CONTENT_TYPE as METRICS_CONTENT_TYPE
from sessionwire.adapters.telemetry.prometheus import PrometheusTelemetry


def metrics_router(gateway: Gateway, exposition: PrometheusTelemetry) -> APIRouter:
    router = APIRouter()

    @router.get("/metrics", include_in_schema=False)
    async def prometheus_metrics(
        grant: Annotated[Grant, Depends(authenticated)],
    ) -> Response:
        """Prometheus metrics (docs/operations.md): an operator token only."""
        if not grant.is_operator:
            raise ApiError(403, "forbidden", "metrics need an operator token")
        # Collecting reads the store (pending runs, outbox depth): on a reader thread.
        text = await gateway.served.read(lambda _store: exposition.exposition())
        return Response(text, media_type=METRICS_CONTENT_TYPE)

    return router

"""The live event stream (ADR 0023): ``GET /v1/events`` as Server-Sent Events."""

import functools
from typing import Annotated

from fastapi import APIRouter, Depends, Header, Query
from fastapi.responses import StreamingResponse
from sessionwire.adapters.access.auth import authenticated
from sessionwire.adapters.access.errors import ApiError, error_responses
from sessionwire.adapters.access.tokens import Grant
from sessionwire.adapters.bootstrap import Gateway
from sessionwire.adapters.http.event_cursors import EventCursors
from sessionwire.adapters.http.event_source import EVENT_STREAM, LAST_EVENT_ID, event_source
from sessionwire.application.event_stream.subscription import parse_cursor

# Log positions are 64-bit integers in the stores.
MAX_POSITION = 2**63 - 1


def stream_start(
    grant: Grant, after: int, last_event_id: str | None, cursors: EventCursors
) -> int | str:
    """Where a subscriber's stream starts: ``after``, or the id a reconnecting client
    sends. A session-bound subscriber's ids are sealed (``EventCursors``): it resumes
    from one of them, or starts at 0; a log position would let it count what it may not
    see, so none other is taken from it."""
    if grant.session is not None:
        if after != 0:
            raise ApiError(
                400,
                "bad_request",
                f"a session-bound token follows from 0 or resumes with {LAST_EVENT_ID}: "
                "its event ids are not log positions",
            )
        if last_event_id is None:
            return 0
        try:
            return cursors.open(grant.session, last_event_id.strip())
        except ValueError:
            raise ApiError(
                400, "bad_request", f"{LAST_EVENT_ID} must be an event's id from this stream"
            ) from None
    if last_event_id is None:
        return after
    resumed = last_event_id.strip()
    try:
        position, _ = parse_cursor(resumed)
    except ValueError:
        position = MAX_POSITION + 1
    if position > MAX_POSITION or len(resumed) > 40:
        raise ApiError(400, "bad_request", f"{LAST_EVENT_ID} must be an event's id (its cursor)")
    return resumed


def events_router(gateway: Gateway, cursors: EventCursors) -> APIRouter:
    router = APIRouter()

    @router.get(
        "/v1/events",
        tags=["events"],
        response_class=StreamingResponse,
        responses={
            200: {
                "description": (
                    "Server-Sent Events: one `data:` line per recorded event (its JSON, "
                    "docs/events.md), `id:` its log position; `:` comment lines are "
                    "heartbeats. The stream stays open for new events."
                ),
                "content": {EVENT_STREAM: {"schema": {"type": "string"}}},
            },
            **error_responses(400, 401, 422),
        },
    )
    async def events(
        grant: Annotated[Grant, Depends(authenticated)],
        after: Annotated[
            int,
            Query(ge=0, le=MAX_POSITION, description="the log position to follow from"),
        ] = 0,
        session: Annotated[
            str | None,
            Query(
                min_length=1,
                max_length=512,
                description="only this session's events (and its runs', exchanges', spawns')",
            ),
        ] = None,
        trace: Annotated[
            str | None,
            Query(min_length=1, max_length=200, description="only this chain's events"),
        ] = None,
        follow: Annotated[
            bool,
            Query(
                description=(
                    "keep the stream open for new events (default); false: send what is "
                    "recorded now and end"
                )
            ),
        ] = True,
        last_event_id: Annotated[
            str | None,
            Header(
                alias=LAST_EVENT_ID,
                description=(
                    "resume after this event id: a position, or position.k inside a batch "
                    "(what a reconnecting client sends)"
                ),
            ),
        ] = None,
    ) -> StreamingResponse:
        """The recorded events after a position, then each new one as it is recorded.

        An operator token sees every event; a session-bound token only the events of
        sessions its session may read (as ``sessions_history``)."""
        start = stream_start(grant, after, last_event_id, cursors)
        try:
            subscription = gateway.subscribe(
                start,
                session_key=session,
                trace_id=trace,
                requester=grant.session,
            )
        except ValueError as error:
            raise ApiError(400, "bad_request", str(error)) from None
        return StreamingResponse(
            event_source(
                subscription,
                gateway.served.clock,
                follow=follow,
                shown=None
                if grant.session is None
                else functools.partial(cursors.sealed_event, grant.session),
            ),
            media_type=EVENT_STREAM,
            # Proxies must neither cache nor buffer a stream.
            headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"},
        )

    return router

"""A waiting run asks the MCP client by elicitation (decision 33, ADR 0045).

Which runs: the run a waited ``sessions_send`` of this MCP session started and answered
``input_required`` for (the call the client is waiting on). When the client declared the
elicitation capability (form mode), the call does not just answer ``input_required``:

- at the stateless revision (2026-07-28; stdio and ``--http``), the call answers an
  ``InputRequiredResult`` embedding an ``elicitation/create`` form, and its
  ``requestState`` names the run; the client asks its user and retries the call with the
  answer;
- at a handshake revision, over a connection that can carry a server request (stdio),
  the server sends ``elicitation/create`` during the call.

The prompt is the message; the run's options are an enum of one ``answer`` field (free
text: a string field). An ``accept`` is the run's input through the same one check as the
``run_input`` tool (the MCP session as ``by``: visibility, scopes, options), so an answer
after someone else's is refused and the client is told (``isError``); a ``decline`` or
``cancel`` leaves the run waiting and the call answers what it would have answered
without elicitation. A run resource a client only follows is never elicited for: the
stateless revision has no server request to send outside a call, and reading a resource
must not ask a person (a client without the capability reads the prompt there).

The ``requestState`` is not sealed: it names only the run, and the answer it carries
passes the check every other answer passes, so forging one can do nothing ``run_input``
cannot; unsealed, it stays valid across a server restart, as the wait itself does.
"""

from __future__ import annotations

import json
from typing import Any

from mcp import types
from mcp.server.context import ServerRequestContext
from mcp.shared.exceptions import MCPError, NoBackChannelError
from mcp_types.version import MODERN_PROTOCOL_VERSIONS
from sessionwire.adapters.bootstrap import Gateway
from sessionwire.application.library_logging import library_logger

log = library_logger("sessionwire.mcp")

# The key of the one input request in an InputRequiredResult, and the answer's field.
INPUT_KEY = "runInput"
ANSWER_FIELD = "answer"
# What marks a requestState as this module's (the run it names follows).
STATE_PREFIX = "sessionwire-run-input:"
ANSWER_TOOL = "run_input"

Context = ServerRequestContext[Any, Any]


def asks(result: dict[str, Any]) -> bool:
    """Whether a tool result is a run waiting for input that an elicitation can answer."""
    return result.get("status") == "input_required" and isinstance(result.get("runId"), str)


def can_elicit(declared: types.ClientCapabilities | None) -> bool:
    """The client declared form elicitation (an empty capability object means form)."""
    capability = declared.elicitation if declared is not None else None
    return capability is not None and (capability.form is not None or capability.url is None)


def answer_schema(options: list[str] | None) -> dict[str, Any]:
    """The form: one required string, the run's options as its enum when it has any."""
    field: dict[str, Any] = {"type": "string", "title": "Answer"}
    if options:
        field["enum"] = list(options)
    else:
        field["minLength"] = 1
    return {"type": "object", "properties": {ANSWER_FIELD: field}, "required": [ANSWER_FIELD]}


def form(result: dict[str, Any]) -> types.ElicitRequestFormParams:
    return types.ElicitRequestFormParams(
        message=str(result.get("prompt", "")), requested_schema=answer_schema(result.get("options"))
    )


class RunElicitation:
    """The elicitation of one MCP server (one session): it asks, and it answers."""

    def __init__(self, gateway: Gateway, requester: str) -> None:
        self.gateway = gateway
        self.requester = requester

    @staticmethod
    def is_answer(params: types.CallToolRequestParams) -> bool:
        """A retried call carrying this module's requestState: an answer, not a new call."""
        return params.request_state is not None and params.request_state.startswith(STATE_PREFIX)

    async def ask(
        self, ctx: Context, result: dict[str, Any]
    ) -> dict[str, Any] | types.InputRequiredResult:
        """What the call answers for ``result``, a run waiting for input: the result as it
        is when the client cannot be asked, else the elicitation (stateless revision) or
        the outcome of one (handshake revision)."""
        if not asks(result) or not can_elicit(ctx.session.client_capabilities):
            return result
        if ctx.session.protocol_version in MODERN_PROTOCOL_VERSIONS:
            # The waited call's own answer travels in the state: a decline gives it back.
            state = STATE_PREFIX + json.dumps(result, ensure_ascii=False)
            return types.InputRequiredResult(
                input_requests={INPUT_KEY: types.ElicitRequest(params=form(result))},
                request_state=state,
            )
        if not ctx.session.can_send_request:
            return result  # stateless HTTP at a handshake revision: no channel to ask on
        asked = form(result)
        try:
            answer = await ctx.session.elicit_form(
                asked.message, asked.requested_schema, related_request_id=ctx.request_id
            )
        except (MCPError, NoBackChannelError) as error:
            log.info("mcp elicitation failed", run_id=result["runId"], error=str(error))
            return result
        return await self._settle(result, answer)

    async def answer(self, params: types.CallToolRequestParams) -> dict[str, Any]:
        """A retried call's answer: the run's input when the client accepted."""
        assert params.request_state is not None
        try:
            result = json.loads(params.request_state[len(STATE_PREFIX) :])
        except ValueError:
            result = None
        if not isinstance(result, dict) or not asks(result):
            return {"status": "error", "tool": params.name, "error": "invalid requestState"}
        answer = (params.input_responses or {}).get(INPUT_KEY)
        if not isinstance(answer, types.ElicitResult):
            return {
                "status": "error",
                "tool": params.name,
                "error": f"the retried call carries no elicitation answer under {INPUT_KEY!r}",
            }
        return await self._settle(result, answer)

    async def _settle(self, result: dict[str, Any], answer: types.ElicitResult) -> dict[str, Any]:
        """An accepted answer goes where every answer goes (``run_input``, as this
        session); a declined or cancelled one leaves the run waiting."""
        if answer.action != "accept":
            log.info("mcp elicitation not answered", run_id=result["runId"], action=answer.action)
            return result
        text = (answer.content or {}).get(ANSWER_FIELD)
        if not isinstance(text, str):
            return {
                "status": "error",
                "tool": ANSWER_TOOL,
                "error": f"the accepted elicitation carries no {ANSWER_FIELD!r} string",
            }
        arguments = {"runId": result["runId"], "text": text}
        answered = await self.gateway.served.call_tool(self.requester, ANSWER_TOOL, arguments)
        log.info("mcp elicitation answered", run_id=result["runId"], status=answered["status"])
        return answered

"""An AgentRuntime for any OpenAI-compatible ``/v1/chat/completions`` server.

OpenAI, vLLM, llama.cpp's server and Ollama all speak it. One run is one chat
completion: the configured system prompt and the run's injected context become system
messages, the session's recent transcript (user and assistant text) follows, then the
run's message. The reply's ``usage`` becomes the run's tokens.

Requests go through the egress client (``http.egress``, ADR 0040): a server on loopback
or a private network must be named in ``http.egress.allow``; an answer larger than
``maxResponseBytes`` fails the run, and is not retried, nor is a refused address.

Rate limits (429), server errors (5xx), timeouts and refused connections are retried with
exponential backoff; every wait goes through the run's clock, so a virtual clock controls
it as it controls the rest of the gateway. Any other answer fails the run at once, and the
run records the error (status, and the server's own message when it gave one).

With ``use_tools(gateway.call_tool)`` the model is offered the run's session tools
(``RunRequest.tools``) as function tools; it calls them as the run's session, and the
turn goes on until it answers without a tool call (at most ``maxToolRounds`` rounds).

With ``askTool: true`` the model is also offered ``request_input`` (``{prompt, options?}``):
calling it ends the turn asking a person (decision 33); the run waits, and the answer is
the message of its next turn, which the model reads after its question in the transcript.
"""

from __future__ import annotations

import json
import os
from collections.abc import Awaitable, Callable
from typing import Any

import httpx
from pydantic import BaseModel, ConfigDict, Field, ValidationError
from pydantic.alias_generators import to_camel
from sessionwire.adapters.egress.client import egress_client
from sessionwire.adapters.egress.fence import Resolver, system_resolver
from sessionwire.application.config.gateway_config import EgressConfig, describe_errors
from sessionwire.application.library_logging import library_logger
from sessionwire.application.ports.clock_and_ids import Clock
from sessionwire.application.ports.runtime import (
    AgentRuntime,
    InputRequest,
    RunReply,
    RunRequest,
)
from sessionwire.application.tools.schemas import tool_schemas
from sessionwire.domain.errors import SessionwireError

log = library_logger("sessionwire.openai_runtime")

RETRIED_STATUSES = frozenset({408, 409, 429, 500, 502, 503, 504})

ToolCaller = Callable[[str, str, dict[str, Any]], Awaitable[dict[str, Any]]]
"""``(requester_key, tool_name, params) -> result``: a gateway's ``call_tool``."""


class OpenAIRuntimeError(SessionwireError, RuntimeError):
    """A chat completion that did not succeed; the text is what the run records."""


class OpenAIRuntimeConfig(BaseModel):
    """How to reach the server. Keys are camelCase in files (``baseUrl``), snake_case in
    Python (``base_url``); both are accepted."""

    model_config = ConfigDict(
        extra="forbid", frozen=True, alias_generator=to_camel, populate_by_name=True
    )

    base_url: str = Field(min_length=1, description="e.g. https://api.openai.com/v1")
    model: str = Field(min_length=1)
    api_key_env: str | None = Field(
        default=None, description="environment variable holding the API key (Bearer token)"
    )
    timeout_seconds: float = Field(default=60.0, gt=0, allow_inf_nan=False)
    max_retries: int = Field(default=2, ge=0, le=10)
    backoff_seconds: float = Field(default=1.0, ge=0, allow_inf_nan=False)
    """The first wait before a retry; each later wait doubles it."""
    max_backoff_seconds: float = Field(default=30.0, ge=0, allow_inf_nan=False)
    history_limit: int = Field(default=20, ge=0, le=1000)
    """How many of the session's latest transcript messages go with each run."""
    system_prompt: str | None = None
    temperature: float | None = Field(default=None, ge=0, le=2)
    max_tokens: int | None = Field(default=None, ge=1)
    headers: dict[str, str] = Field(default_factory=dict)
    max_tool_rounds: int = Field(default=8, ge=0, le=100)
    """With tools (``use_tools``): how many rounds of tool calls one turn may make."""
    ask_tool: bool = False
    """Offer the model ``request_input``: its turn may stop to ask a person (decision 33)."""

    @classmethod
    def load(cls, data: dict[str, Any]) -> OpenAIRuntimeConfig:
        """Validate a config dict; a bad one is a ValueError naming the key."""
        try:
            return cls.model_validate(data)
        except ValidationError as error:
            message = describe_errors(error).replace("invalid config", "invalid openai config")
            raise ValueError(message) from None

    @property
    def endpoint(self) -> str:
        return self.base_url.rstrip("/") + "/chat/completions"


class OpenAIRuntime(AgentRuntime):
    """Runs each agent turn as one chat completion on an OpenAI-compatible server."""

    def __init__(
        self,
        config: OpenAIRuntimeConfig | dict[str, Any],
        *,
        egress: EgressConfig | None = None,
        transport: httpx.AsyncBaseTransport | None = None,
        resolver: Resolver = system_resolver,
    ) -> None:
        """``egress`` is the gateway config's ``http.egress`` (None: its defaults, public
        addresses only); ``transport`` is for tests (an in-process server, fenced all the
        same)."""
        self.config = (
            config if isinstance(config, OpenAIRuntimeConfig) else OpenAIRuntimeConfig.load(config)
        )
        self._api_key = self._read_api_key()
        self.egress = egress
        self._transport = transport
        self._resolver = resolver
        self._call_tool: ToolCaller | None = None

    def _read_api_key(self) -> str | None:
        name = self.config.api_key_env
        if name is None:
            return None
        key = os.environ.get(name)
        if not key:
            raise ValueError(f"the environment variable {name} (apiKeyEnv) is not set")
        return key

    def use_tools(self, call_tool: ToolCaller) -> None:
        """Let the model call the run's session tools through ``call_tool`` (a gateway's
        ``call_tool``), as the run's session. Without it, no tools are offered."""
        self._call_tool = call_tool

    async def run(self, request: RunRequest) -> RunReply:
        bound = log.bind(session_key=request.session_key, run_id=request.run_id)
        messages = await chat_messages(request, self.config)
        tools = self.offered_tools(request)
        if self.config.ask_tool:
            tools.append(ASK_TOOL)
        usage: dict[str, int] = {}
        async with egress_client(
            self.egress,
            timeout=self.config.timeout_seconds,
            transport=self._transport,
            resolver=self._resolver,
        ) as client:
            for _ in range(self.config.max_tool_rounds + 1):
                answer = await self._post(
                    client, self.request_body(messages, tools), request.clock, bound
                )
                _add_usage(usage, answer.get("usage"))
                message = _first_message(answer)
                calls = message.get("tool_calls") if tools else None
                if not isinstance(calls, list) or not calls:
                    return _reply(message, answer, usage, self.config.model)
                messages.append(
                    {"role": "assistant", "content": message.get("content"), "tool_calls": calls}
                )
                question = _question(calls) if self.config.ask_tool else None
                if isinstance(question, InputRequest):
                    # The turn ends asking a person; the other calls of this round wait
                    # for the answer's turn (the model may make them again then).
                    bound.info("the model asks for input")
                    model = answer.get("model")
                    return RunReply(
                        input_request=question,
                        usage=usage or None,
                        model=model if isinstance(model, str) and model else self.config.model,
                    )
                yielded = False
                for call in calls:
                    if question is not None and _name_of(call) == ASK_TOOL_NAME:
                        messages.append(_tool_answer(call, {"status": "error", "error": question}))
                        continue
                    answered = await self._run_tool(request, call, bound)
                    messages.append(answered)
                    yielded = yielded or _yielded(call, answered)
                if yielded:
                    # sessions_yield ends the turn: the session is woken by a new one
                    # (docs/yield.md); the model is not asked again in this turn.
                    return _reply(message, answer, usage, self.config.model)
        raise OpenAIRuntimeError(
            f"the model still called tools after {self.config.max_tool_rounds} round(s)"
        )

    def offered_tools(self, request: RunRequest) -> list[dict[str, Any]]:
        """The run's tools as chat-completions function tools (none without use_tools)."""
        if self._call_tool is None or self.config.max_tool_rounds == 0:
            return []
        return [
            {"type": "function", "function": schema}
            for schema in tool_schemas()
            if schema["name"] in request.tools
        ]

    async def _run_tool(self, request: RunRequest, call: Any, bound: Any) -> dict[str, Any]:
        """One tool call's answer, as the ``tool`` message the model reads next."""
        function = call.get("function") if isinstance(call, dict) else None
        name = function.get("name") if isinstance(function, dict) else None
        raw_arguments = function.get("arguments") if isinstance(function, dict) else None
        call_id = call.get("id") if isinstance(call, dict) else None
        result: dict[str, Any]
        if not isinstance(name, str) or name not in request.tools or self._call_tool is None:
            result = {"status": "forbidden", "tool": str(name), "error": "not a tool of this run"}
        else:
            try:
                arguments = json.loads(raw_arguments or "{}")
            except (TypeError, ValueError):
                arguments = None
            if isinstance(arguments, dict):
                result = await self._call_tool(request.session_key, name, arguments)
            else:
                result = {
                    "status": "error",
                    "tool": name,
                    "error": "arguments must be a JSON object",
                }
        bound.info("tool called by the model", tool=str(name), status=result.get("status"))
        return {"role": "tool", "tool_call_id": str(call_id), "content": json.dumps(result)}

    def request_body(
        self, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None = None
    ) -> dict[str, Any]:
        body: dict[str, Any] = {"model": self.config.model, "messages": messages}
        if tools:
            body["tools"] = tools
        if self.config.temperature is not None:
            body["temperature"] = self.config.temperature
        if self.config.max_tokens is not None:
            body["max_tokens"] = self.config.max_tokens
        return body

    def _headers(self) -> dict[str, str]:
        headers = {"Content-Type": "application/json", **self.config.headers}
        if self._api_key is not None:
            headers["Authorization"] = f"Bearer {self._api_key}"
        return headers

    async def _post(
        self,
        client: httpx.AsyncClient,
        body: dict[str, Any],
        clock: Clock,
        bound: Any,
    ) -> dict[str, Any]:
        attempts = self.config.max_retries + 1
        for attempt in range(1, attempts + 1):
            retry_after: float | None = None
            try:
                response = await client.post(
                    self.config.endpoint, json=body, headers=self._headers()
                )
            except httpx.TimeoutException:
                problem = f"no answer within {self.config.timeout_seconds:g}s"
            except httpx.TransportError as error:
                problem = f"cannot reach {self.config.endpoint}: {_describe(error)}"
            else:
                if response.status_code < 300:
                    return _json_object(response)
                problem = f"HTTP {response.status_code}{_server_message(response)}"
                if response.status_code not in RETRIED_STATUSES:
                    raise OpenAIRuntimeError(f"chat completion refused: {problem}")
                retry_after = _retry_after(response)
            if attempt == attempts:
                raise OpenAIRuntimeError(
                    f"chat completion failed after {attempts} attempt(s): {problem}"
                )
            wait = self.backoff(attempt, retry_after)
            bound.warning("chat completion retried", attempt=attempt, problem=problem, wait=wait)
            await clock.sleep(wait)
        raise AssertionError("unreachable")  # the loop returns or raises

    def backoff(self, attempt: int, retry_after: float | None = None) -> float:
        """Seconds to wait after failed attempt ``attempt`` (1-based): the server's
        Retry-After when it gave one, else exponential; never above the maximum."""
        wait: float = self.config.backoff_seconds * 2.0 ** (attempt - 1)
        if retry_after is not None:
            wait = retry_after
        return min(wait, self.config.max_backoff_seconds)


async def chat_messages(request: RunRequest, config: OpenAIRuntimeConfig) -> list[dict[str, Any]]:
    """The chat messages of one run: system prompt, injected context, history, message."""
    messages: list[dict[str, Any]] = []
    if config.system_prompt:
        messages.append({"role": "system", "content": config.system_prompt})
    if request.context:
        messages.append({"role": "system", "content": request.context})
    history = await request.transcript(config.history_limit + 1) if config.history_limit else []
    # The gateway records the run's message in the transcript before the run starts; it
    # is sent once, last.
    if history and _is_the_message(history[-1], request.message):
        history = history[:-1]
    for entry in history[-config.history_limit :] if config.history_limit else []:
        role = entry.get("role")
        text = _text_of(entry)
        if role in {"user", "assistant"} and text:
            messages.append({"role": str(role), "content": text})
    messages.append({"role": "user", "content": request.message})
    return messages


def _is_the_message(entry: dict[str, Any], message: str) -> bool:
    return entry.get("role") == "user" and _text_of(entry) == message


def _text_of(entry: dict[str, Any]) -> str:
    content = entry.get("content")
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        return ""
    texts = [
        block["text"]
        for block in content
        if isinstance(block, dict)
        and block.get("type") == "text"
        and isinstance(block.get("text"), str)
    ]
    return "\n".join(texts)


ASK_TOOL_NAME = "request_input"
ASK_TOOL: dict[str, Any] = {
    "type": "function",
    "function": {
        "name": ASK_TOOL_NAME,
        "description": (
            "Stop and ask a person (an approval, a missing detail, a choice). Your turn "
            "ends; their answer comes as the next message."
        ),
        "parameters": {
            "type": "object",
            "properties": {
                "prompt": {"type": "string", "description": "The question to ask."},
                "options": {
                    "type": "array",
                    "items": {"type": "string"},
                    "description": "The answers to choose from (leave out for free text).",
                },
            },
            "required": ["prompt"],
            "additionalProperties": False,
        },
    },
}


def _name_of(call: Any) -> object:
    function = call.get("function") if isinstance(call, dict) else None
    return function.get("name") if isinstance(function, dict) else None


def _question(calls: list[Any]) -> InputRequest | str | None:
    """What the model's ``request_input`` call asks; why it cannot be asked (its
    arguments are wrong), for the model to read; None when it made no such call."""
    call = next((call for call in calls if _name_of(call) == ASK_TOOL_NAME), None)
    if call is None:
        return None
    try:
        arguments = json.loads(call["function"].get("arguments") or "{}")
        return InputRequest.model_validate(arguments)
    except (TypeError, ValueError) as error:
        return f"request_input needs {{prompt, options?}}: {error}"


def _tool_answer(call: Any, result: dict[str, Any]) -> dict[str, Any]:
    call_id = call.get("id") if isinstance(call, dict) else None
    return {"role": "tool", "tool_call_id": str(call_id), "content": json.dumps(result)}


def _first_message(answer: dict[str, Any]) -> dict[str, Any]:
    choices = answer.get("choices")
    if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
        raise OpenAIRuntimeError("chat completion answer has no choices")
    message = choices[0].get("message")
    return message if isinstance(message, dict) else {}


def _yielded(call: Any, answered: dict[str, Any]) -> bool:
    """The call was sessions_yield and it yielded."""
    function = call.get("function") if isinstance(call, dict) else None
    if not isinstance(function, dict) or function.get("name") != "sessions_yield":
        return False
    try:
        result = json.loads(answered["content"])
    except (TypeError, ValueError):
        return False
    return isinstance(result, dict) and result.get("status") == "yielded"


def _reply(
    message: dict[str, Any], answer: dict[str, Any], usage: dict[str, int], configured: str
) -> RunReply:
    content = message.get("content")
    if content is not None and not isinstance(content, str):
        raise OpenAIRuntimeError("chat completion answer's message content is not text")
    model = answer.get("model")
    return RunReply(
        text=content or "",
        usage=usage or None,
        model=model if isinstance(model, str) and model else configured,
    )


def _add_usage(total: dict[str, int], raw: object) -> None:
    """Sum one answer's usage into ``total`` (a turn with tool calls makes several)."""
    for key, value in (usage_of(raw) or {}).items():
        total[key] = total.get(key, 0) + value


def usage_of(raw: object) -> dict[str, int] | None:
    """OpenAI usage as transcript usage: prompt -> input, completion -> output."""
    if not isinstance(raw, dict):
        return None
    usage: dict[str, int] = {}
    for ours, theirs in (
        ("input", "prompt_tokens"),
        ("output", "completion_tokens"),
        ("totalTokens", "total_tokens"),
    ):
        value = raw.get(theirs)
        if isinstance(value, int) and value >= 0:
            usage[ours] = value
    details = raw.get("prompt_tokens_details")
    cached = details.get("cached_tokens") if isinstance(details, dict) else None
    if isinstance(cached, int) and cached >= 0:
        usage["cacheRead"] = cached
    return usage or None


def _json_object(response: httpx.Response) -> dict[str, Any]:
    try:
        data = response.json()
    except ValueError:
        raise OpenAIRuntimeError("chat completion answer is not JSON") from None
    if not isinstance(data, dict):
        raise OpenAIRuntimeError("chat completion answer is not a JSON object")
    return data


def _server_message(response: httpx.Response) -> str:
    """``: <message>`` from an OpenAI-style error body, or nothing."""
    try:
        data = response.json()
    except ValueError:
        return ""
    error = data.get("error") if isinstance(data, dict) else None
    message = error.get("message") if isinstance(error, dict) else error
    return f": {message}" if isinstance(message, str) and message else ""


def _retry_after(response: httpx.Response) -> float | None:
    # Servers that send Retry-After send seconds; an HTTP date falls back to backoff.
    try:
        return max(0.0, float(response.headers.get("retry-after", "")))
    except ValueError:
        return None


def _describe(error: Exception) -> str:
    return str(error).strip() or type(error).__name__


__all__ = [
    "OpenAIRuntime",
    "OpenAIRuntimeConfig",
    "OpenAIRuntimeError",
    "ToolCaller",
    "chat_messages",
]

"""ScriptedRuntime: deterministic agents from a list of rules (contract §3).

A run is matched against the rules in order; the first rule whose given fields all match
wins (``agent`` exact, ``session`` glob, ``step`` exact, ``match`` regex search on the
incoming message). ``reply`` may use ``{message}``, ``{session}`` and ``{turn}``;
``delaySeconds`` waits on the gateway clock; ``fail`` makes the run fail with that error.
``tools`` calls the gateway's tools from inside the turn, in order, before the reply
(``{"tool": "sessions_spawn", "params": {"task": "…"}}``, then
``{"tool": "sessions_yield"}``): a call that yields ends the calls. ``ask`` ends the turn
asking a person instead of replying (``{"prompt": "Deploy?", "options": ["yes", "no"]}``,
decision 33): the run waits, and the answer is the message of its next turn, matched
against the rules like any. No rule matching gives an empty reply.

``match`` runs on what agents send, so it is bounded (Python's engine backtracks: ``a*a*x``
took 6 s on 2,000 characters): at most one unbounded repeat, none nested inside another,
no backreferences, at most 256 characters of pattern, and it looks at the first
``MATCH_WINDOW`` characters of the message only.
"""

from __future__ import annotations

import fnmatch
import json
import re
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator
from sessionwire.application.config.gateway_config import describe_errors
from sessionwire.application.ports.runtime import AgentRuntime, RunReply, RunRequest
from sessionwire.domain.errors import SessionwireError
from sessionwire.domain.run import RUN_STEPS, InputRequest

MAX_MATCH_PATTERN = 256
MATCH_WINDOW = 4096
_REPEATS = ("MAX_REPEAT", "MIN_REPEAT", "POSSESSIVE_REPEAT")


def _repeat_problems(items: Any, inside_repeat: bool) -> tuple[int, list[str]]:
    """(unbounded repeats, problems) in a parsed pattern."""
    unbounded = 0
    problems: list[str] = []
    for op, value in items:
        name = str(op)
        if name in {"GROUPREF", "GROUPREF_EXISTS"}:
            problems.append("backreferences are not allowed")
        if name in _REPEATS:
            low, high, body = value
            if inside_repeat and high != low:
                problems.append("a repeat inside a repeat can take exponential time")
            if high == re._constants.MAXREPEAT:  # type: ignore[attr-defined]
                unbounded += 1
            inner, found = _repeat_problems(body, inside_repeat or high > 1)
            unbounded += inner
            problems += found
        elif name == "SUBPATTERN":
            inner, found = _repeat_problems(value[-1], inside_repeat)
            unbounded += inner
            problems += found
        elif name == "BRANCH":
            if inside_repeat:
                problems.append("alternatives inside a repeat can take exponential time")
            for branch in value[1]:
                inner, found = _repeat_problems(branch, inside_repeat)
                unbounded += inner
                problems += found
        elif name in {"ASSERT", "ASSERT_NOT"}:
            inner, found = _repeat_problems(value[1], inside_repeat)
            unbounded += inner
            problems += found
    return unbounded, problems


def check_match_pattern(pattern: str) -> None:
    """Raise ValueError unless ``pattern`` is a regex that runs in bounded time."""
    if len(pattern) > MAX_MATCH_PATTERN:
        raise ValueError(f"match is longer than {MAX_MATCH_PATTERN} characters")
    try:
        parsed = re._parser.parse(pattern)  # type: ignore[attr-defined]
        re.compile(pattern)
    except re.error as error:
        raise ValueError(f"match is not a valid regular expression: {error}") from None
    unbounded, problems = _repeat_problems(parsed, False)
    if unbounded > 1:
        problems.append("more than one unbounded repeat (*, +, {n,}) can take polynomial time")
    if problems:
        raise ValueError(f"match {pattern!r}: {problems[0]}")


class ScriptError(SessionwireError, ValueError):
    """A script that cannot be used; the message names the rule and the field."""


class ScriptedToolCall(BaseModel):
    """One tool call a scripted turn makes (its JSON result is kept in ``tool_results``)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    tool: str
    params: dict[str, Any] = Field(default_factory=dict)


class ScriptRule(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    agent: str | None = None
    session: str | None = None
    step: str | None = None
    match: str | None = None
    reply: str = ""
    delaySeconds: float = Field(default=0, ge=0, allow_inf_nan=False)
    usage: dict[str, int] | None = None
    model: str | None = None
    fail: str | None = None
    tools: list[ScriptedToolCall] = Field(default_factory=list)
    ask: InputRequest | None = None

    @field_validator("step")
    @classmethod
    def _known_step(cls, value: str | None) -> str | None:
        if value is not None and value not in RUN_STEPS:
            raise ValueError(f"unknown step {value!r} (steps: {', '.join(RUN_STEPS)})")
        return value

    @field_validator("match")
    @classmethod
    def _compiles(cls, value: str | None) -> str | None:
        if value is not None:
            check_match_pattern(value)
        return value

    def applies_to(self, request: RunRequest) -> bool:
        if self.agent is not None and self.agent != request.agent_id:
            return False
        if self.session is not None and not fnmatch.fnmatchcase(request.session_key, self.session):
            return False
        if self.step is not None and self.step != request.step:
            return False
        if self.match is None:
            return True
        return re.search(self.match, request.message[:MATCH_WINDOW]) is not None

    def render(self, request: RunRequest) -> str:
        values = {
            "{message}": request.message,
            "{session}": request.session_key,
            "{turn}": "" if request.turn is None else str(request.turn),
        }
        text = self.reply
        for placeholder, value in values.items():
            text = text.replace(placeholder, value)
        return text


class Script(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    rules: list[ScriptRule] = Field(default_factory=list)


class ScriptedRuntime(AgentRuntime):
    def __init__(self, rules: list[ScriptRule]) -> None:
        self.rules = rules
        self.calls: list[RunRequest] = []
        self.tool_results: list[tuple[str, str, dict[str, Any]]] = []
        """(run id, tool, result) of every tool call a scripted turn made, in order."""

    @classmethod
    def from_dict(cls, script: dict[str, Any]) -> ScriptedRuntime:
        try:
            return cls(Script.model_validate(script).rules)
        except ValidationError as error:
            raise ScriptError(
                describe_errors(error).replace("invalid config", "invalid script")
            ) from None

    @classmethod
    def from_file(cls, path: str | Path) -> ScriptedRuntime:
        file = Path(path)
        try:
            text = file.read_text(encoding="utf-8")
        except OSError as error:
            raise ScriptError(f"cannot read script {file}: {error.strerror}") from error
        try:
            if file.suffix.lower() in {".yaml", ".yml"}:
                data = yaml.safe_load(text)
            else:
                data = json.loads(text)
        except (ValueError, yaml.YAMLError) as error:
            raise ScriptError(f"script {file} cannot be parsed: {error}") from error
        if not isinstance(data, dict):
            raise ScriptError(f"script {file} must hold an object with 'rules'")
        return cls.from_dict(data)

    def add(self, **rule: Any) -> ScriptedRuntime:
        """Append one rule (same fields as in a script); returns the runtime for chaining."""
        try:
            self.rules.append(ScriptRule.model_validate(rule))
        except ValidationError as error:
            raise ScriptError(
                describe_errors(error).replace("invalid config", "invalid script")
            ) from None
        return self

    async def run(self, request: RunRequest) -> RunReply:
        self.calls.append(request)
        rule = next((r for r in self.rules if r.applies_to(request)), None)
        if rule is None:
            return RunReply(text="")
        if rule.delaySeconds > 0:
            await request.clock.sleep(rule.delaySeconds)
        for call in rule.tools:
            if request.call_tool is None:
                raise RuntimeError(f"the gateway offers no tools to call {call.tool}")
            result = await request.call_tool(call.tool, dict(call.params))
            self.tool_results.append((request.run_id, call.tool, result))
            if call.tool == "sessions_yield" and result.get("status") == "yielded":
                break  # the turn ends here (sessions_yield)
        if rule.fail is not None:
            raise RuntimeError(rule.fail)
        if rule.ask is not None:
            return RunReply(input_request=rule.ask, usage=rule.usage, model=rule.model)
        return RunReply(text=rule.render(request), usage=rule.usage, model=rule.model)

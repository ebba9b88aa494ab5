"""A demo scenario: a scripted team of agents and the steps they play (``sessionwire demo``).

A scenario file (YAML, or JSON5 for any other suffix) holds the gateway's config
(OpenClaw-shaped), the agents' scripted replies (ScriptedRuntime rules) and the steps:

- ``message``: a message recorded into a session (a user speaking, say);
- ``call``: a tool call made by a requester session, checked against the tool's
  parameters when the file is loaded;
- ``advance``: simulated time moving on (a virtual clock, so an hour takes no time).

Each step may carry a ``note`` the demo prints before playing it.
"""

from __future__ import annotations

from datetime import UTC, datetime
from importlib.resources import files
from pathlib import Path
from typing import Any, Literal

import json5
import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator
from sessionwire.adapters.runtimes.scripted import ScriptRule
from sessionwire.application.config.gateway_config import GatewayConfig, key_path
from sessionwire.application.gateway import TOOLS
from sessionwire.application.tools.params import ToolInputError
from sessionwire.domain.errors import SessionwireError

DEFAULT_SCENARIO = "team.yaml"
STEP_KINDS = ("message", "call", "advance")
ToolName = Literal[
    "sessions_list", "sessions_history", "sessions_send", "sessions_spawn", "agents_list"
]


class ScenarioError(SessionwireError, ValueError):
    """A scenario file that cannot be played; the message names each bad field."""


class _Strict(BaseModel):
    # A misspelt key is an error here: a scenario is written by hand, for one purpose.
    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)


class MessageStep(_Strict):
    session: str = Field(min_length=1)
    text: str = Field(min_length=1)
    role: Literal["user", "assistant", "toolResult"] = "user"
    channel: str | None = None
    chatType: Literal["direct", "dm", "group", "channel"] | None = None
    displayName: str | None = None
    to: str | None = None
    accountId: str | None = None
    label: str | None = None
    owner: bool = False


class CallStep(_Strict):
    tool: ToolName
    requester: str = Field(default="main", alias="as", min_length=1)
    params: dict[str, Any] = Field(default_factory=dict)
    expect: str | None = None
    """The status the call should return; without it any refusal is a failed step."""

    @model_validator(mode="after")
    def _params_fit_the_tool(self) -> CallStep:
        params_class, _ = TOOLS[self.tool]
        try:
            params_class.parse(self.params)
        except ToolInputError as error:
            raise ValueError(f"params do not fit {self.tool}: {error}") from None
        return self


class AdvanceStep(_Strict):
    seconds: float = Field(default=0, ge=0, allow_inf_nan=False)
    minutes: float = Field(default=0, ge=0, allow_inf_nan=False)
    hours: float = Field(default=0, ge=0, allow_inf_nan=False)

    @property
    def total_seconds(self) -> float:
        return self.seconds + 60 * self.minutes + 3600 * self.hours

    @model_validator(mode="after")
    def _moves(self) -> AdvanceStep:
        if self.total_seconds <= 0:
            raise ValueError("give seconds, minutes or hours greater than 0")
        return self


class Step(_Strict):
    note: str | None = None
    message: MessageStep | None = None
    call: CallStep | None = None
    advance: AdvanceStep | None = None

    @model_validator(mode="after")
    def _one_action(self) -> Step:
        given = [kind for kind in STEP_KINDS if getattr(self, kind) is not None]
        if len(given) != 1:
            found = ", ".join(given) or "none"
            raise ValueError(f"a step needs exactly one of message, call, advance (found: {found})")
        return self

    @property
    def kind(self) -> str:
        return next(kind for kind in STEP_KINDS if getattr(self, kind) is not None)


class Scenario(_Strict):
    name: str = Field(min_length=1)
    description: str = ""
    start: datetime | None = None
    """Simulated start time; default now (and never before the store's last event)."""
    config: GatewayConfig = Field(default_factory=GatewayConfig)
    replies: list[ScriptRule] = Field(default_factory=list)
    steps: list[Step] = Field(min_length=1)
    listAs: str = Field(default="main", min_length=1)
    """The requester whose sessions_list ends the demo."""

    @property
    def span_seconds(self) -> float:
        """At most how much simulated time a play takes: its ``advance`` steps, each
        scripted delay once per step (a generous bound), and ten minutes for the rest."""
        advances = sum(step.advance.total_seconds for step in self.steps if step.advance)
        delays = sum(rule.delaySeconds for rule in self.replies) * len(self.steps)
        return advances + delays + 600

    @field_validator("start")
    @classmethod
    def _aware(cls, value: datetime | None) -> datetime | None:
        if value is not None and value.tzinfo is None:
            return value.replace(tzinfo=UTC)
        return value

    @classmethod
    def parse(cls, data: Any, source: str) -> Scenario:
        if not isinstance(data, dict):
            raise ScenarioError(f"scenario {source} must hold an object (name, config, steps…)")
        try:
            return cls.model_validate(data)
        except ValidationError as error:
            raise ScenarioError(
                f"invalid scenario {source}:\n" + "\n".join(_problems(error))
            ) from None


def _problems(error: ValidationError) -> list[str]:
    lines = []
    for item in error.errors():
        cause = (item.get("ctx") or {}).get("error")
        message = str(cause) if isinstance(cause, ValueError) else item["msg"]
        lines.append(f"  {key_path(item['loc']) or '(top level)'}: {message}")
    return lines


def load_scenario(path: str | Path | None = None) -> Scenario:
    """The scenario in ``path``, or the one shipped with sessionwire. Raises ScenarioError."""
    if path is None:
        text = files("sessionwire.adapters.cli.demo").joinpath(DEFAULT_SCENARIO).read_text("utf-8")
        return Scenario.parse(yaml.safe_load(text), DEFAULT_SCENARIO)
    file = Path(path)
    try:
        text = file.read_text(encoding="utf-8")
    except OSError as error:
        raise ScenarioError(f"cannot read scenario {file}: {error.strerror}") from None
    try:
        if file.suffix.lower() in {".yaml", ".yml"}:
            data = yaml.safe_load(text)
        else:
            data = json5.loads(text)
    except (ValueError, yaml.YAMLError) as error:
        raise ScenarioError(f"scenario {file} cannot be parsed: {error}") from None
    return Scenario.parse(data, str(file))

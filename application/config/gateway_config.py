"""GatewayConfig: OpenClaw's config shape (contract §4), validated with pydantic.

A known key with a wrong type is an error naming the key. An unknown key is ignored with
a warning naming its path, unless it is a near miss of a known one (the same but for
case, or an edit or two away: ``sandBox``, ``sendpolicy``): a misspelt protection must
not silently stay off, so that is an error naming the intended key. In a section of
sessionwire's own (``deliveries``, ``redaction``, ``session.agentToAgent.budget``, an
agent's ``a2a``, each of ``schedules``) any unknown key is an error naming the section's
keys. Agent ids that are the same once normalised (``ops`` and ``OPS``) are an error too.
Files are read bounded (size, nesting) and every failure is a ``ConfigError``, never a
traceback.
"""

from __future__ import annotations

import builtins
import ipaddress
import json
import math
from pathlib import Path
from typing import Any, Literal, TypeVar

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator
from sessionwire.application.library_logging import library_logger
from sessionwire.domain.causality import DEFAULT_MAX_HOPS
from sessionwire.domain.egress import EgressPolicy
from sessionwire.domain.errors import SessionwireError
from sessionwire.domain.keys import KeyRules, normalize_agent_id, normalize_main_key
from sessionwire.domain.policy import (
    DEFAULT_BUSY,
    AgentToAgentPolicy,
    BusyAction,
    BusyPolicy,
    SandboxPolicy,
    SandboxSettings,
    SendPolicy,
    SendRule,
    SessionsVisibility,
    VisibilityPolicy,
    normalize_chat_type,
)
from sessionwire.domain.redaction import InvalidPattern, Redactor, check_pattern, redactor_for
from sessionwire.domain.retry_policy import RetryPolicy
from sessionwire.domain.schedule_timing import InvalidSchedule, check_definition
from sessionwire.domain.trace_budget import TraceBudget

log = library_logger("sessionwire.config")

DEFAULT_PING_PONG_TURNS = 5
MAX_PING_PONG_TURNS = 5


class ConfigError(SessionwireError, ValueError):
    """A configuration that cannot be used; the message names each bad key."""


# A config file is a few KiB; JSON5 parsing is slow (~28 s per MB), so it is bounded.
MAX_CONFIG_BYTES = 256 * 1024
MAX_CONFIG_DEPTH = 32


def edit_distance(a: str, b: str, limit: int) -> int:
    """Levenshtein distance, or ``limit + 1`` once it must exceed ``limit``."""
    if abs(len(a) - len(b)) > limit:
        return limit + 1
    previous = list(range(len(b) + 1))
    for i, char_a in enumerate(a, start=1):
        current = [i]
        for j, char_b in enumerate(b, start=1):
            current.append(
                min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + (char_a != char_b))
            )
        if min(current) > limit:
            return limit + 1
        previous = current
    return previous[-1]


def intended_key(unknown: str, known: builtins.list[str]) -> str | None:
    """The known key ``unknown`` is a near miss of, if any."""
    for name in known:
        if unknown.lower() == name.lower():
            return name
    folded = unknown.lower()
    for name in known:
        # A plural or singular of a known key is another setting (OpenClaw has both
        # `model` and `models`), not a typo.
        if len(name) < 5 or folded.rstrip("s") == name.lower().rstrip("s"):
            continue
        if edit_distance(folded, name.lower(), 2 if len(name) >= 8 else 1) <= (
            2 if len(name) >= 8 else 1
        ):
            return name
    return None


class NearMissKey(SessionwireError, ValueError):
    """Unknown keys that look like misspelt known ones."""


class _Section(BaseModel):
    # Unknown keys are kept aside so they can be reported, never acted on. Strict: a
    # wrong type is an error naming the key, never coerced ("3" is not a number,
    # "yes" is not `true`; openclaw-behaviour §2.7 enables A2A only on `=== true`).
    model_config = ConfigDict(extra="allow", populate_by_name=True, strict=True, defer_build=True)

    @model_validator(mode="after")
    def _no_near_misses(self) -> _Section:
        known = builtins.list(type(self).model_fields)
        misses = [
            f"unknown key {name!r}: did you mean {intended!r}?"
            for name in (self.model_extra or {})
            if (intended := intended_key(name, known)) is not None
        ]
        if misses:
            raise NearMissKey("; ".join(misses))
        return self


class UnknownKey(SessionwireError, ValueError):
    """Keys a section of sessionwire's own does not have."""


class _OwnSection(_Section):
    """A section only sessionwire reads, not part of OpenClaw's shape: an unknown key in
    it is no other tool's setting, only a mistake, so it is refused with the section's
    known keys (an OpenClaw section ignores one, with a warning)."""

    @model_validator(mode="after")
    def _no_unknown_keys(self) -> _OwnSection:
        unknown = builtins.list(self.model_extra or {})
        if unknown:
            known = ", ".join(type(self).model_fields)
            named = ", ".join(map(repr, unknown))
            plural = "s" if len(unknown) > 1 else ""
            raise UnknownKey(f"unknown key{plural} {named}; known: {known}")
        return self


Section = TypeVar("Section", bound=_Section)


def unvalidated_defaults(section: type[Section]) -> Section:
    """What ``section()`` gives, built without validation: the defaults are valid by
    construction (a test compares the two), and validating them builds the schema of
    every section on the way: 40 M instructions, 2.4% of a ``sessions list`` (issue 23)."""
    nested = {
        name: unvalidated_defaults(factory)
        for name, field in section.model_fields.items()
        if isinstance(factory := field.default_factory, type) and issubclass(factory, _Section)
    }
    built = section.model_construct(_fields_set=set(), **nested)
    assert isinstance(built, section)  # the pydantic plugin types it as the bound
    return built


class SendPolicyMatch(_Section):
    channel: str | None = None
    chatType: str | None = None
    keyPrefix: str | None = None

    @model_validator(mode="before")
    @classmethod
    def _legacy_provider(cls, data: Any) -> Any:
        # The older document form names the channel `provider` or `surface`.
        if isinstance(data, dict) and "channel" not in data:
            for legacy in ("provider", "surface"):
                if legacy in data:
                    data = {**data, "channel": data[legacy]}
                    data.pop(legacy)
                    break
        return data

    @field_validator("chatType")
    @classmethod
    def _known_chat_type(cls, value: str | None) -> str | None:
        if value is not None and normalize_chat_type(value) is None:
            raise ValueError("chatType must be direct, dm, group or channel")
        return value


class SendPolicyRule(_Section):
    action: Literal["allow", "deny"] = "allow"
    match: SendPolicyMatch = Field(default_factory=SendPolicyMatch)


class SendPolicyConfig(_Section):
    rules: list[SendPolicyRule] = Field(default_factory=list)
    default: Literal["allow", "deny"] = "allow"


class TraceBudgetConfig(_OwnSection):
    """``session.agentToAgent.budget`` (decision 31): every limit unset by default; 0 is
    a valid limit (refuse every run, or spawn), a negative one an error."""

    maxRuns: int | None = Field(default=None, ge=0)
    maxSpawns: int | None = Field(default=None, ge=0)
    maxSteers: int | None = Field(default=None, ge=0)
    """Steers the trace's runs may send (busy policy ``steer``, the subagents tool)."""
    maxTokens: int | None = Field(default=None, ge=0)
    maxCost: float | None = Field(default=None, ge=0, allow_inf_nan=False)
    onExceeded: Literal["refuse", "cancel"] = "refuse"


class AgentToAgentSession(_Section):
    maxPingPongTurns: float | None = None
    maxHops: int = Field(default=DEFAULT_MAX_HOPS, ge=1)
    """Sends and spawns in one chain before the next is refused (decision 17)."""
    busy: BusyAction = DEFAULT_BUSY
    """What a sessions_send into a session with a run in flight does (ADR 0022)."""
    budget: TraceBudgetConfig = Field(default_factory=TraceBudgetConfig)
    """Limits per trace on runs, spawns, steers, tokens and cost (decision 31, ADR 0034)."""
    callbacksWithoutRun: Literal["attribute", "refuse"] = "attribute"
    """A tool call over HTTP or MCP without the run header, from a session with a run in
    progress: counted in that run's trace and hop (``attribute``), or refused (ADR 0034)."""

    @property
    def max_ping_pong_turns(self) -> int:
        value = self.maxPingPongTurns
        if value is None or not math.isfinite(value):
            return DEFAULT_PING_PONG_TURNS
        return max(0, min(MAX_PING_PONG_TURNS, math.floor(value)))


class SessionConfig(_Section):
    mainKey: str = "main"
    scope: Literal["per-sender", "global"] = "per-sender"
    dmScope: str | None = None
    sendPolicy: SendPolicyConfig | None = None
    agentToAgent: AgentToAgentSession = Field(default_factory=AgentToAgentSession)


class AgentToAgentTools(_Section):
    enabled: bool = False
    allow: list[str] = Field(default_factory=list)


class SubagentToolPolicy(_Section):
    allow: list[str] | None = None
    deny: list[str] = Field(default_factory=list)


class SubagentTools(_Section):
    tools: SubagentToolPolicy = Field(default_factory=SubagentToolPolicy)


class SessionsTools(_Section):
    visibility: SessionsVisibility | None = None
    """Which sessions the session tools may reach (contract decision 28); None: ``tree``,
    or the agent's own setting."""


class ToolsConfig(_Section):
    agentToAgent: AgentToAgentTools = Field(default_factory=AgentToAgentTools)
    subagents: SubagentTools = Field(default_factory=SubagentTools)
    sessions: SessionsTools = Field(default_factory=SessionsTools)


class AgentTools(_Section):
    sessions: SessionsTools = Field(default_factory=SessionsTools)


class SandboxConfig(_Section):
    mode: Literal["off", "non-main", "all"] | None = None
    sessionToolsVisibility: Literal["spawned", "all"] | None = None


MAX_SPAWN_DEPTH = 5
MAX_CHILDREN_PER_AGENT = 20


class SubagentDefaults(_Section):
    archiveAfterMinutes: float = 60
    maxConcurrent: int = Field(default=8, ge=1)
    # Decision 30: nesting is opt-in (1 = sub-agents spawn nothing, as before); a session
    # has at most maxChildrenPerAgent children whose task runs are still going.
    maxSpawnDepth: int = Field(default=1, ge=1, le=MAX_SPAWN_DEPTH, strict=True)
    maxChildrenPerAgent: int = Field(default=5, ge=1, le=MAX_CHILDREN_PER_AGENT, strict=True)
    model: str | dict[str, Any] | None = None


class AgentSubagents(_Section):
    allowAgents: list[str] = Field(default_factory=list)
    model: str | dict[str, Any] | None = None


class AgentDefaults(_Section):
    maxConcurrent: int = Field(default=4, ge=1)
    timeoutSeconds: float = Field(default=600, gt=0)
    model: str | dict[str, Any] | None = None
    subagents: SubagentDefaults = Field(default_factory=SubagentDefaults)
    sandbox: SandboxConfig = Field(default_factory=SandboxConfig)


class A2ASkill(_OwnSection):
    """One skill an agent's A2A Agent Card lists (ADR 0035)."""

    id: str = Field(min_length=1, max_length=200)
    name: str = Field(min_length=1, max_length=200)
    description: str = Field(default="", max_length=4000)
    tags: builtins.list[str] = Field(default_factory=builtins.list)
    examples: builtins.list[str] = Field(default_factory=builtins.list)


class AgentA2A(_OwnSection):
    """What ``serve --a2a`` publishes of an agent: its card's description and skills."""

    description: str | None = Field(default=None, max_length=4000)
    skills: builtins.list[A2ASkill] = Field(default_factory=builtins.list)


class AgentEntry(_Section):
    id: str
    name: str | None = None
    default: bool = False
    model: str | dict[str, Any] | None = None
    subagents: AgentSubagents = Field(default_factory=AgentSubagents)
    sandbox: SandboxConfig | None = None
    tools: AgentTools | None = None
    a2a: AgentA2A | None = None

    @field_validator("id")
    @classmethod
    def _id_not_empty(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("agent id is empty")
        return value


class AgentsConfig(_Section):
    defaults: AgentDefaults = Field(default_factory=AgentDefaults)
    list: builtins.list[AgentEntry] = Field(default_factory=builtins.list)

    @model_validator(mode="after")
    def _ids_unique(self) -> AgentsConfig:
        # `ops` and `OPS` are one agent: a second entry would silently lose its settings
        # (its sandbox, say) to the first.
        first: dict[str, int] = {}
        for index, agent in enumerate(self.list):
            normalized = normalize_agent_id(agent.id)
            if normalized in first:
                earlier = self.list[first[normalized]].id
                raise ValueError(
                    f"list[{index}].id {agent.id!r} is the same agent as "
                    f"list[{first[normalized]}].id {earlier!r} (ids ignore case); "
                    "merge the two entries"
                )
            first[normalized] = index
        return self


class ModelCost(_Section):
    input: float = Field(default=0, ge=0)
    output: float = Field(default=0, ge=0)


class ModelEntry(_Section):
    id: str
    name: str | None = None
    cost: ModelCost | None = None


class ProviderConfig(_Section):
    models: builtins.list[ModelEntry] = Field(default_factory=builtins.list)


class ModelsConfig(_Section):
    providers: dict[str, ProviderConfig] = Field(default_factory=dict)


def _primary(model: str | dict[str, Any] | None) -> str | None:
    """A model setting is a string or ``{primary, fallbacks}``; only primary is used."""
    if isinstance(model, dict):
        primary = model.get("primary")
        return primary.strip() or None if isinstance(primary, str) else None
    return model.strip() or None if isinstance(model, str) else None


class DeliveriesConfig(_OwnSection):
    """How a failed channel delivery is retried (contract §6 decision 13)."""

    firstRetrySeconds: float = Field(default=10, gt=0, allow_inf_nan=False)
    maxRetrySeconds: float = Field(default=600, gt=0, allow_inf_nan=False)
    abandonAfterSeconds: float = Field(default=24 * 3600, gt=0, allow_inf_nan=False)

    @property
    def retry_policy(self) -> RetryPolicy:
        return RetryPolicy(
            first_retry_seconds=self.firstRetrySeconds,
            max_retry_seconds=max(self.firstRetrySeconds, self.maxRetrySeconds),
            abandon_after_seconds=self.abandonAfterSeconds,
        )


class RedactionConfig(_OwnSection):
    """Secrets masked when a session reads another session's messages (docs/security.md)."""

    crossSession: bool = True
    defaults: bool = True
    """The built-in patterns (API keys, tokens, private keys, ...); false keeps only
    ``patterns``."""
    patterns: builtins.list[str] = Field(default_factory=builtins.list)
    """More RE2 patterns; a group named ``secret`` masks only that part of a match."""

    @field_validator("patterns")
    @classmethod
    def _compiles(cls, patterns: builtins.list[str]) -> builtins.list[str]:
        for pattern in patterns:
            try:
                check_pattern(pattern)
            except InvalidPattern as error:
                raise ValueError(str(error)) from None
        return patterns

    def redactor(self) -> Redactor | None:
        """What masks another session's messages; None when cross-session masking is off."""
        if not self.crossSession:
            return None
        return redactor_for(tuple(self.patterns), defaults=self.defaults)


class EgressConfig(_Section):
    """Every request the gateway makes (contract decision 40, docs/security.md
    "Outbound calls"): where it may go, how long it may take, how much is read."""

    allow: builtins.list[str] = Field(default_factory=builtins.list)
    """Addresses, CIDRs, host names or origins that may be reached although not public
    (loopback, private, link-local, metadata ...): ``["127.0.0.1", "10.0.0.0/8",
    "llm.internal", "http://127.0.0.1:8765"]``."""
    maxResponseBytes: int = Field(default=8 * 1024 * 1024, ge=1024)
    """A larger answer is cut off there and fails (a push answer's body is never read)."""
    timeoutSeconds: float = Field(default=30, gt=0, allow_inf_nan=False)
    """Connect, and each read and write; a runtime's own timeout overrides it."""
    followRedirects: bool = False
    """Follow redirects (each hop checked again); never for a push (its token would go
    along)."""
    maxRedirects: int = Field(default=3, ge=0, le=20)
    pushSessions: builtins.list[str] = Field(default_factory=builtins.list)
    """Session-bound tokens of these sessions may set A2A push URLs; operator tokens
    always may, no other token may."""

    @field_validator("allow")
    @classmethod
    def _parses(cls, allow: builtins.list[str]) -> builtins.list[str]:
        EgressPolicy.parse(allow)  # a ValueError names the entry
        return allow

    @property
    def policy(self) -> EgressPolicy:
        return EgressPolicy.parse(self.allow)


class HttpLimitsConfig(_Section):
    """What one grant (one entry of the tokens file) may hold open at once (issue 36)."""

    connectionsPerGrant: int = Field(default=64, ge=1)
    """Requests in flight at once (each holds a connection), event streams included."""
    streamsPerGrant: int = Field(default=8, ge=1)
    """Live event streams (``GET /v1/events``) open at once."""


class HttpConfig(_Section):
    """The HTTP servers (``serve``, ``mcp --http``): whom to believe about client
    addresses, and what one grant may hold, where the gateway's own requests may go
    (docs/security.md)."""

    trustedProxies: builtins.list[str] = Field(default_factory=builtins.list)
    """Addresses or CIDRs whose ``X-Forwarded-For`` / ``Forwarded`` headers are read
    (decision 41); from any other peer they are ignored. Empty: never read."""
    limits: HttpLimitsConfig = Field(default_factory=HttpLimitsConfig)
    egress: EgressConfig = Field(default_factory=EgressConfig)

    @field_validator("trustedProxies")
    @classmethod
    def _networks(cls, proxies: builtins.list[str]) -> builtins.list[str]:
        for proxy in proxies:
            try:
                ipaddress.ip_network(proxy.strip(), strict=False)
            except ValueError:
                raise ValueError(f"not an address or CIDR: {proxy!r}") from None
        return proxies

    def trusted_networks(self) -> tuple[ipaddress.IPv4Network | ipaddress.IPv6Network, ...]:
        return tuple(ipaddress.ip_network(p.strip(), strict=False) for p in self.trustedProxies)


class ScheduleEntry(_OwnSection):
    """One entry of ``schedules`` (decision 36, docs/schedules.md): what
    ``gw.schedule(id, ...)`` takes, defined when a gateway opens."""

    id: str
    message: str
    cron: str | None = None
    everySeconds: float | None = None
    sessionKey: str | None = None
    tz: str = "UTC"

    @model_validator(mode="after")
    def _valid(self) -> ScheduleEntry:
        try:
            check_definition(
                schedule_id=self.id,
                cron=self.cron,
                every_seconds=self.everySeconds,
                tz=self.tz,
                message=self.message,
            )
        except InvalidSchedule as error:
            raise ValueError(str(error)) from None
        return self


class GatewayConfig(_Section):
    session: SessionConfig = Field(default_factory=SessionConfig)
    tools: ToolsConfig = Field(default_factory=ToolsConfig)
    agents: AgentsConfig = Field(default_factory=AgentsConfig)
    models: ModelsConfig = Field(default_factory=ModelsConfig)
    deliveries: DeliveriesConfig = Field(default_factory=DeliveriesConfig)
    redaction: RedactionConfig = Field(default_factory=RedactionConfig)
    http: HttpConfig = Field(default_factory=HttpConfig)
    schedules: builtins.list[ScheduleEntry] = Field(default_factory=builtins.list)
    """Schedules defined at every open (decision 36); one the config no longer names,
    defined by it before, is removed."""

    @field_validator("schedules")
    @classmethod
    def _schedule_ids_unique(
        cls, schedules: builtins.list[ScheduleEntry]
    ) -> builtins.list[ScheduleEntry]:
        ids = [entry.id for entry in schedules]
        repeated = sorted({schedule_id for schedule_id in ids if ids.count(schedule_id) > 1})
        if repeated:
            raise ValueError(f"schedule ids must be unique: {', '.join(repeated)}")
        return schedules

    def known_models(self) -> set[str]:
        """Every model the config names: the catalog (``provider/id`` and ``id``) and the
        agents' own settings."""
        known: set[str] = set()
        for provider, entry in self.models.providers.items():
            for model in entry.models:
                known.update({model.id, f"{provider}/{model.id}"})
        settings = [self.agents.defaults.model, self.agents.defaults.subagents.model]
        for agent in self.agents.list:
            settings.extend([agent.model, agent.subagents.model])
        known.update(name for name in map(_primary, settings) if name)
        return known

    def subagent_model(self, agent_id: str) -> str | None:
        """The model a sub-agent of ``agent_id`` runs on when the spawn names none."""
        agent = self.agent(agent_id)
        return _primary(agent.subagents.model if agent else None) or _primary(
            self.agents.defaults.subagents.model
        )

    def cost_of(self, model: str | None, usage: Any) -> float | None:
        """Dollars for ``usage`` on ``model`` when the catalog prices it (per million tokens)."""
        if model is None or usage is None:
            return None
        for provider, entry in self.models.providers.items():
            for candidate in entry.models:
                if model in {candidate.id, f"{provider}/{candidate.id}"} and candidate.cost:
                    cost = candidate.cost
                    dollars: float = usage.input * cost.input + usage.output * cost.output
                    return dollars / 1_000_000
        return None

    @property
    def archive_after_minutes(self) -> float | None:
        """None disables archiving (a value that is not finite, or ≤ 0); else ≥ 1, floored."""
        minutes = self.agents.defaults.subagents.archiveAfterMinutes
        if not math.isfinite(minutes) or minutes <= 0:
            return None
        return max(1, math.floor(minutes))

    @classmethod
    def load(cls, source: dict[str, Any] | str | Path | None) -> GatewayConfig:
        """From a dict, or a JSON5 file; ``None`` gives the defaults. Raises ConfigError."""
        if source is None:
            return unvalidated_defaults(cls)
        if isinstance(source, str | Path):
            source = read_config_file(Path(source))
        try:
            config = cls.model_validate(source)
        except ValidationError as error:
            raise ConfigError(describe_errors(error)) from error
        for path_text in config.unknown_keys():
            log.warning("config key ignored", key=path_text)
        return config

    def unknown_keys(self) -> list[str]:
        return list(_unknown_keys(self, ""))

    @property
    def key_rules(self) -> KeyRules:
        return KeyRules(
            main_key=normalize_main_key(self.session.mainKey),
            scope=self.session.scope,
            default_agent_id=self.default_agent_id,
        )

    @property
    def default_agent_id(self) -> str:
        agents = self.agents.list
        chosen = next((a for a in agents if a.default), agents[0] if agents else None)
        return normalize_agent_id(chosen.id if chosen else None)

    def agent(self, agent_id: str) -> AgentEntry | None:
        return next((a for a in self.agents.list if normalize_agent_id(a.id) == agent_id), None)

    # The policies the config sets, as the domain's one policy module reads them.

    @property
    def agent_to_agent_policy(self) -> AgentToAgentPolicy:
        section = self.tools.agentToAgent
        return AgentToAgentPolicy(enabled=section.enabled, allow=tuple(section.allow))

    @property
    def send_policy(self) -> SendPolicy:
        section = self.session.sendPolicy
        if section is None:
            return SendPolicy()
        rules = tuple(
            SendRule(
                action=rule.action,
                channel=rule.match.channel,
                chat_type=rule.match.chatType,
                key_prefix=rule.match.keyPrefix,
            )
            for rule in section.rules
        )
        return SendPolicy(rules=rules, default=section.default, configured=True)

    @property
    def trace_budget(self) -> TraceBudget:
        section = self.session.agentToAgent.budget
        return TraceBudget(
            max_runs=section.maxRuns,
            max_spawns=section.maxSpawns,
            max_tokens=section.maxTokens,
            max_cost=section.maxCost,
            on_exceeded=section.onExceeded,
            max_steers=section.maxSteers,
        )

    @property
    def busy_policy(self) -> BusyPolicy:
        return BusyPolicy(default=self.session.agentToAgent.busy)

    @property
    def visibility_policy(self) -> VisibilityPolicy:
        """``tools.sessions.visibility``, overridable per agent (contract decision 28)."""
        default = self.tools.sessions.visibility or VisibilityPolicy().default
        per_agent = {
            normalize_agent_id(agent.id): agent.tools.sessions.visibility
            for agent in self.agents.list
            if agent.tools is not None and agent.tools.sessions.visibility is not None
        }
        return VisibilityPolicy(default=default, per_agent=per_agent)

    @property
    def sandbox_policy(self) -> SandboxPolicy:
        """``agents.defaults.sandbox``, each key overridable per agent (contract §4)."""
        defaults = self.agents.defaults.sandbox
        default = SandboxSettings(
            mode=defaults.mode or "off", visibility=defaults.sessionToolsVisibility or "spawned"
        )
        per_agent = {
            normalize_agent_id(agent.id): SandboxSettings(
                mode=agent.sandbox.mode or default.mode,
                visibility=agent.sandbox.sessionToolsVisibility or default.visibility,
            )
            for agent in self.agents.list
            if agent.sandbox is not None
        }
        return SandboxPolicy(default=default, per_agent=per_agent)


def _too_deep(text: str, limit: int = MAX_CONFIG_DEPTH) -> bool:
    # Counted on brackets alone (a bracket in a string counts too: harmless, configs
    # nest a few levels), so that json5's recursive parser is never asked to go deep.
    depth = 0
    for char in text:
        if char in "[{":
            depth += 1
            if depth > limit:
                return True
        elif char in "]}":
            depth -= 1
    return False


def read_config_file(path: Path) -> dict[str, Any]:
    """A JSON5 config file's object, read bounded; every failure is a ConfigError."""
    try:
        with path.open("rb") as stream:
            raw = stream.read(MAX_CONFIG_BYTES + 1)
    except OSError as error:
        raise ConfigError(f"cannot read config file {path}: {error.strerror}") from None
    if len(raw) > MAX_CONFIG_BYTES:
        raise ConfigError(f"config file {path} is larger than {MAX_CONFIG_BYTES // 1024} KiB")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as error:
        raise ConfigError(
            f"config file {path} is not UTF-8 (byte {error.start} cannot be decoded)"
        ) from None
    if _too_deep(text):
        raise ConfigError(f"config file {path} nests deeper than {MAX_CONFIG_DEPTH} levels")
    try:
        data = json.loads(text)  # most configs are plain JSON: parsed fast
    except ValueError:
        import json5  # only for a file that is not plain JSON: most processes need none

        try:
            data = json5.loads(text)
        except (ValueError, RecursionError) as error:
            raise ConfigError(f"config file {path} is not valid JSON5: {error}") from None
    if not isinstance(data, dict):
        raise ConfigError(f"config file {path} must hold an object at the top level")
    return data


def _unknown_keys(model: BaseModel, prefix: str) -> list[str]:
    found = [f"{prefix}{name}" for name in (model.model_extra or {})]
    for name in type(model).model_fields:
        value = getattr(model, name)
        children = value if isinstance(value, list) else [value]
        for index, child in enumerate(children):
            if isinstance(child, BaseModel):
                suffix = f"[{index}]" if isinstance(value, list) else ""
                found.extend(_unknown_keys(child, f"{prefix}{name}{suffix}."))
    return found


def describe_errors(error: ValidationError) -> str:
    lines = []
    for item in error.errors():
        where = key_path(item["loc"]) or "(top level)"
        lines.append(f"{where}: {item['msg']}")
    return "invalid config: " + "; ".join(lines)


def key_path(loc: tuple[int | str, ...]) -> str:
    """``agents.list[0].id``: the same dotted form ``unknown_keys`` reports."""
    path = ""
    for part in loc:
        path += f"[{part}]" if isinstance(part, int) else (f".{part}" if path else str(part))
    return path

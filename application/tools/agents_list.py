"""``agents_list``: the agent ids a requester may target with ``sessions_spawn``."""

from __future__ import annotations

from sessionwire.application.context import ToolContext
from sessionwire.application.tools.params import AgentsListParams
from sessionwire.application.tools.results import AgentListEntry, AgentsListResult
from sessionwire.domain.keys import normalize_agent_id


def agents_list(context: ToolContext, params: AgentsListParams | None = None) -> AgentsListResult:
    # ``params``: the tool takes none (its model refuses any), called as every tool is.
    config = context.config
    requester = context.requester.agent_id
    entry = config.agent(requester)
    allow = entry.subagents.allowAgents if entry else []
    allow_any = any(item.strip() == "*" for item in allow)
    configured = {normalize_agent_id(a.id): a for a in config.agents.list}
    if allow_any:
        others = set(configured)
    else:
        others = {
            normalize_agent_id(item) for item in allow if item.strip() and item.strip() != "*"
        }
    others.discard(requester)
    ids = [requester, *sorted(others)]
    agents = []
    for agent_id in ids:
        known = configured.get(agent_id)
        name = known.name.strip() if known and known.name and known.name.strip() else None
        agents.append(AgentListEntry(id=agent_id, name=name, configured=known is not None))
    return AgentsListResult(requester=requester, allowAny=allow_any, agents=agents)

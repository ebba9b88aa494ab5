"""Use cases: the gateway, tools, projections and the ports it needs."""

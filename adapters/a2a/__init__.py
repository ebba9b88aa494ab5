"""A2A protocol adapters: the server over the gateway, Agent Cards, push delivery (ADR 0035)."""

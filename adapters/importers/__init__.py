"""Importers of sessions recorded by other gateways (OpenClaw)."""

"""Adapters: persistence, CLI and other outside things."""

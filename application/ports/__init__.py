"""Ports: what the application needs from the outside, one module per role."""

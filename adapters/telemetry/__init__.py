"""Telemetry adapters (ADR 0019): Prometheus metrics and OpenTelemetry spans."""

"""The one HTTP client every outbound request goes through (ADR 0040)."""

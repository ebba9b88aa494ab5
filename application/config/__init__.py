"""The gateway's configuration: OpenClaw's config shape, validated."""

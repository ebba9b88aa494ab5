"""Running agents: per-session actors and lanes, the exchange and spawn process managers."""

"""Pure domain: session keys, aggregates, events and rules. No I/O, no clock."""

"""The test kit: a virtual clock, captured deliveries, given/when/then, the pytest plugin."""

"""How long a test waits for something that should come before it calls it a hang.

A bound, not a measure: far above what any step takes on a loaded machine (a full
suite at load 15 took several seconds for an OpenAPI document's first build), so
reaching it means something waits for ever. Timings a test asserts are not these."""

HANG_SECONDS = 60

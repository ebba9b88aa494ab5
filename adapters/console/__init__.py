"""The read-only web console (docs/console.md, docs/adr/0018-console.md)."""

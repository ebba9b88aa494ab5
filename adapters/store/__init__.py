"""The event store and its tables: eventsourcing on SQLite and PostgreSQL, read models, chain."""

"""The session tools: parameters, results, schemas, and how a named session is resolved."""

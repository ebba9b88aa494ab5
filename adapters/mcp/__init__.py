"""The MCP server: the session tools over the Model Context Protocol."""

"""MCP tool calls (``POST /mcp``): the tool catalog and the MCP SDK server."""

"""Transports: HTTP (JSON-RPC and REST), and later WebSocket, MCP and gRPC. They only translate."""

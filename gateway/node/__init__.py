"""Clients of the Solana node: JSON-RPC over HTTP, its WebSocket pubsub, its geyser gRPC."""

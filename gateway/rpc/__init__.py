"""JSON-RPC over the node: planning a call, forwarding it, the response cache (docs/api.md)."""

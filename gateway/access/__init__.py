"""An account's access rules: origins, client addresses and methods its API key and session tokens may
use (docs/api.md, "Access rules"): pure rules, their table, each process's guard, the JSON-RPC stage
and the routes."""

"""The MCP tests' fixtures: the sending tests' gateway in this process (in front of the session's
devnode, with the real PostgreSQL and Redis) and a paying caller with an API key."""

from __future__ import annotations

from tests.sending.conftest import caller, gateway

__all__ = ["caller", "gateway"]

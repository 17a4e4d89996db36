"""MCP: the gateway's tools through the official `mcp` SDK's streamable-HTTP client. Each tool call
is one JSON-RPC call, billed at its method's price (getSlot: 1 credit).

export GATEWAY_API_KEY=$(.venv/bin/gateway fund)      # on the embedded devnode; or your own key
.venv/bin/python examples/mcp_client.py
"""

from __future__ import annotations

import asyncio
import os

import httpx2
import mcp_types as types
from mcp.client.session import ClientSession
from mcp.client.streamable_http import streamable_http_client

from gateway_client import require_dev_api_key

URL = os.environ.get("GATEWAY_URL", "http://127.0.0.1:8000")
API_KEY = require_dev_api_key()  # $GATEWAY_API_KEY, else the key gateway fund saved beside the wallet


async def main() -> None:
    # The API key travels as on JSON-RPC: the X-Api-Key header of every MCP request.
    async with (
        httpx2.AsyncClient(headers={"X-Api-Key": API_KEY}) as http,
        streamable_http_client(f"{URL}/mcp", http_client=http) as (read, write),
        ClientSession(read, write) as session,
    ):
        init = await session.initialize()
        print(f"MCP {init.protocol_version} with {init.server_info.name}")
        listed = await session.list_tools()
        print(f"{len(listed.tools)} tools: {', '.join(tool.name for tool in listed.tools)}")
        result = await session.call_tool("getSlot", {})
        text = "".join(block.text for block in result.content if isinstance(block, types.TextContent))
        if result.is_error:
            raise SystemExit(f"getSlot refused: {text}")
        print(f"getSlot: slot {text}")


if __name__ == "__main__":
    asyncio.run(main())

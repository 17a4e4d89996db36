"""A paid call with an API key, from solana-py, as the header and as the ?api-key= query parameter.

export GATEWAY_API_KEY=$(.venv/bin/gateway fund)      # on the embedded devnode; or your own key
.venv/bin/python examples/api_key.py
"""

from __future__ import annotations

import asyncio
import os

from solana.rpc.async_api import AsyncClient

from gateway_client import require_dev_api_key, solana_client

URL = os.environ.get("GATEWAY_URL", "http://127.0.0.1:8000")
API_KEY = require_dev_api_key()  # $GATEWAY_API_KEY, else the key gateway fund saved beside the wallet


async def main() -> None:
    async with solana_client(URL, api_key=API_KEY) as client:  # X-Api-Key on every request
        slot = (await client.get_slot()).value
        print(f"slot {slot} (X-Api-Key header)")
    async with AsyncClient(f"{URL}/?api-key={API_KEY}") as client:  # any client that only takes a URL
        height = (await client.get_block_height()).value
        print(f"block height {height} (?api-key= in the URL)")


if __name__ == "__main__":
    asyncio.run(main())

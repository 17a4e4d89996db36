"""Reading the gateway's errors: solana-py hides the HTTP body, gateway_error() gives it back typed.

A new wallet with an API key and no credits gets 402 -32010, with how to top up.

    .venv/bin/python examples/errors.py
"""

from __future__ import annotations

import asyncio
import os

from solders.keypair import Keypair

from gateway_client import GatewayClient, InsufficientCredits, WalletSigner, gateway_error, solana_client

URL = os.environ.get("GATEWAY_URL", "http://127.0.0.1:8000")


async def main() -> None:
    signer = WalletSigner(bytes(Keypair()))
    async with GatewayClient(URL, signer=signer) as gw:
        key = await gw.create_api_key()  # an account with no credits yet

    async with solana_client(URL, api_key=key) as client:
        try:
            await client.get_slot()
        except Exception as exc:  # solana-py's SolanaRpcException, around the HTTP 402
            error = gateway_error(exc)
            assert isinstance(error, InsufficientCredits), error
            print(f"{error.status} {error.code} {error.message}")
            print(f"deposit to {error.terms['deposit_address']}: {error.terms['instructions']}")

    async with GatewayClient(URL, api_key=key) as gw:  # the gateway's own client raises it directly
        try:
            await gw.rpc("getSlot")
        except InsufficientCredits as error:
            print(f"GatewayClient: {type(error).__name__}, {error.data['required']} credit needed")


if __name__ == "__main__":
    asyncio.run(main())

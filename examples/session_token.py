"""A session token: sign a challenge once, then send the token with solana-py; log out at the end.

.venv/bin/gateway fund        # once: the wallet, $GATEWAY_HOME/wallets/dev-wallet.json ($GATEWAY_WALLET: another)
.venv/bin/python examples/session_token.py
"""

from __future__ import annotations

import asyncio
import os

import aiohttp
from solders.pubkey import Pubkey

from gateway_client import WalletSigner, dev_wallet_path, solana_client

URL = os.environ.get("GATEWAY_URL", "http://127.0.0.1:8000")
WALLET = dev_wallet_path()  # $GATEWAY_WALLET, else $GATEWAY_HOME/wallets/dev-wallet.json


async def main(signer: WalletSigner) -> None:
    async with aiohttp.ClientSession() as http:
        async with http.post(f"{URL}/auth/challenge", json={"pubkey": signer.pubkey}) as resp:
            challenge = (await resp.json())["challenge"]
        proof = {"pubkey": signer.pubkey, "challenge": challenge, "signature": signer.sign_challenge(challenge)}
        async with http.post(f"{URL}/auth/verify", json=proof) as resp:
            token = (await resp.json())["token"]
        print(f"session for {signer.pubkey}")

        async with solana_client(URL, session_token=token) as client:  # Authorization: Bearer <token>
            balance = (await client.get_balance(Pubkey.from_string(signer.pubkey))).value
            print(f"wallet balance {balance} lamports")

        async with http.post(f"{URL}/auth/logout", json={}, headers={"Authorization": f"Bearer {token}"}) as resp:
            print(f"logout: {(await resp.json())['status']}")


if __name__ == "__main__":
    asyncio.run(main(WalletSigner.from_file(WALLET)))

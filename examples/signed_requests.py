"""Per-request wallet signatures (no key, no session): each solana-py request carries X-Pubkey,
X-Signature, X-Timestamp and X-Nonce, signed over the method, path and body.

    .venv/bin/gateway fund        # once: the wallet, $GATEWAY_HOME/wallets/dev-wallet.json ($GATEWAY_WALLET: another)
    .venv/bin/python examples/signed_requests.py
"""

from __future__ import annotations

import asyncio
import os

from gateway_client import WalletSigner, dev_wallet_path, solana_client

URL = os.environ.get("GATEWAY_URL", "http://127.0.0.1:8000")
WALLET = dev_wallet_path()  # $GATEWAY_WALLET, else $GATEWAY_HOME/wallets/dev-wallet.json


async def main(signer: WalletSigner) -> None:
    async with solana_client(URL, signer=signer) as client:
        for _ in range(2):  # a fresh nonce and signature each time
            slot = (await client.get_slot()).value
            print(f"slot {slot} (signed by {signer.pubkey})")


if __name__ == "__main__":
    asyncio.run(main(WalletSigner.from_file(WALLET)))

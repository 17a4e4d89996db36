"""The chain's fixed points: the USDC and faucet accounts, the node's seeded identity and vote keys,
blockhash age and signature fee as on mainnet, and the commitment levels this node reports."""

from __future__ import annotations

import hashlib

from solders.keypair import Keypair
from solders.pubkey import Pubkey

USDC_MINT = Pubkey.from_string("EPjFWdd5AufqSSqeM2qN1xzybapC8G4wEGGkZwyTDt1v")
USDC_DECIMALS = 6
MAX_PROCESSING_AGE = 150  # blocks a blockhash stays valid, as on mainnet
LAMPORTS_PER_SIGNATURE = 5_000
FAUCET_LAMPORTS = 500_000_000 * 10**9
# Commitment levels as this node reports them: processed in the landing slot, confirmed one slot
# later, finalized two slots later (a single validator needs no votes; it keeps tests fast).
PROCESSED, CONFIRMED, FINALIZED = 0, 1, 2
COMMITMENT_NAMES = ("processed", "confirmed", "finalized")


def _seeded_keypair(label: str) -> Keypair:
    return Keypair.from_seed(hashlib.sha256(f"devnode-{label}".encode()).digest())


IDENTITY = _seeded_keypair("identity")
VOTE_ACCOUNT = _seeded_keypair("vote").pubkey()
FAUCET = _seeded_keypair("faucet")

"""Solana keypair files the service generates once and keeps in the data dir (JSON array of 64 bytes)."""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path

from solders.keypair import Keypair

DEPOSIT_WALLET = "keys/deposit-wallet.json"
FEE_PAYER = "keys/fee-payer.json"


def load_keypair(path: Path) -> Keypair:
    data = json.loads(path.read_text())
    if not isinstance(data, list) or len(data) != 64:
        raise ValueError(f"{path} is not a Solana keypair file (a JSON array of 64 bytes)")
    return Keypair.from_bytes(bytes(data))


def load_or_create_keypair(path: Path) -> Keypair:
    """Read the keypair at ``path``, creating it (mode 0600) on first use.

    Written to a temporary file and linked into place, so replicas starting together never read a
    half-written file: the first link wins and the others read the winner's key.
    """
    if path.exists():
        return load_keypair(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    keypair = Keypair()
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".key-")
    try:
        with os.fdopen(fd, "w") as f:
            json.dump(list(bytes(keypair)), f)
        os.chmod(tmp, 0o600)
        os.link(tmp, path)
    except FileExistsError:
        return load_keypair(path)
    finally:
        os.unlink(tmp)
    return keypair


def ensure_service_keys(home: Path) -> dict[str, str]:
    """Create the service's keys if missing; return their public keys by file name."""
    return {name: str(load_or_create_keypair(home / name).pubkey()) for name in (DEPOSIT_WALLET, FEE_PAYER)}

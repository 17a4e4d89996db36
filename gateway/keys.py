"""Solana keypair files the service generates once and keeps in the data dir (JSON array of 64 bytes).

Which process may create them: ``gateway up`` creates them before anything starts and hands every
process it starts the public keys (settings ``deposit_address`` and ``fee_payer_address``). A process
given an address never creates a key: on a machine without the file, a new deposit wallet would be
advertised in 402 terms and nobody would watch it. Only a process started without one (a replica run
by hand on the one machine, the tests) reads the data dir's file and creates it if missing.
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path

from solders.keypair import Keypair
from solders.pubkey import Pubkey

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


def service_pubkey(configured: str | None, home: Path, name: str) -> Pubkey:
    """A service key's public key: the configured address, else the data dir's key (created if missing)."""
    if configured:
        return Pubkey.from_string(configured)
    return load_or_create_keypair(home / name).pubkey()


def service_keypair(configured: str | None, home: Path, name: str) -> Keypair | None:
    """A service key to sign with. With its address configured the file is only read (None when this
    machine has none) and must hold that address; without one it is read or created."""
    path = home / name
    if not configured:
        return load_or_create_keypair(path)
    if not path.exists():
        return None
    keypair = load_keypair(path)
    if str(keypair.pubkey()) != configured:
        raise ValueError(f"{path} holds {keypair.pubkey()}, not the configured {configured}")
    return keypair


def ensure_service_keys(home: Path) -> dict[str, str]:
    """Create the service's keys if missing; return their public keys by file name."""
    return {name: str(load_or_create_keypair(home / name).pubkey()) for name in (DEPOSIT_WALLET, FEE_PAYER)}

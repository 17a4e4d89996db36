"""Account state across restarts: <data_dir>/accounts.json holds the slot position and every
account a transaction, airdrop or injection has touched (plus the genesis mints); <data_dir>/feed.json
counts the launch feed's runs. Transaction history and blocks are not persisted. (A follower keeps none of
this: it loads its leader's state at every start.) The ready file (`DevnodeConfig.ready_file`) tells whoever
started the process where it listens."""

from __future__ import annotations

import base64
import contextlib
import json
import os
from pathlib import Path
from typing import Any

from solders.account import Account
from solders.keypair import Keypair
from solders.pubkey import Pubkey

STATE_FILE = "accounts.json"
USDC_AUTHORITY_FILE = "usdc-mint-authority.json"
#: The launch feed's run counter (devnode/feed/launch.py `next_run`): each start of the feed is a new run.
FEED_RUN_FILE = "feed.json"


def account_to_json(account: Account) -> dict[str, Any]:
    return {
        "lamports": account.lamports,
        "data": base64.b64encode(bytes(account.data)).decode(),
        "owner": str(account.owner),
        "executable": account.executable,
        "rentEpoch": account.rent_epoch,
    }


def account_from_json(obj: dict[str, Any]) -> Account:
    return Account(
        int(obj["lamports"]),
        base64.b64decode(obj["data"]),
        Pubkey.from_string(obj["owner"]),
        bool(obj.get("executable", False)),
        int(obj.get("rentEpoch", 0)),
    )


def _atomic_write(path: Path, text: str, mode: int = 0o644) -> None:
    """``text`` into a new file of ``mode`` (given at creation: a secret is never readable by others, not
    even before a chmod), renamed over ``path``."""
    tmp = path.with_name(path.name + ".tmp")
    with contextlib.suppress(FileNotFoundError):
        tmp.unlink()  # a crash's leftover keeps its own mode: start anew
    with os.fdopen(os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, mode), "w") as f:
        f.write(text)
    os.replace(tmp, path)


def load_state(data_dir: Path) -> tuple[dict[str, Any] | None, list[tuple[Pubkey, Account]]]:
    """The saved chain position and accounts, or (None, []) on first start."""
    path = data_dir / STATE_FILE
    if not path.exists():
        return None, []
    raw = json.loads(path.read_text())
    accounts = [(Pubkey.from_string(k), account_from_json(v)) for k, v in raw.get("accounts", {}).items()]
    return raw.get("state"), accounts


def save_state(data_dir: Path, state: dict[str, Any], accounts: list[tuple[Pubkey, Account]]) -> None:
    doc = {"version": 1, "state": state, "accounts": {str(k): account_to_json(a) for k, a in accounts}}
    _atomic_write(data_dir / STATE_FILE, json.dumps(doc, indent=0))


def load_or_create_keypair(path: Path) -> Keypair:
    """A Solana CLI keypair file (JSON array of 64 bytes); created once, reused afterwards."""
    if path.exists():
        return Keypair.from_bytes(bytes(json.loads(path.read_text())))
    keypair = Keypair()
    _atomic_write(path, json.dumps(list(bytes(keypair))), 0o600)
    return keypair


def write_ready_file(path: Path, urls: dict[str, Any]) -> None:
    """The node's URLs as JSON, written whole (a reader never sees half of it)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    _atomic_write(path, json.dumps(urls, indent=1))

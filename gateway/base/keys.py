"""Solana keypair files of the service (JSON array of 64 bytes, in the data dir), and the keys a process serves.

Which process may create them: only ``gateway up`` (:func:`ensure_service_keys`, before anything starts;
and ``gateway fund`` its dev wallet). It hands every process it starts the public keys (settings
``deposit_address`` and ``fee_payer_address``). A serving process (an ingress replica, a gRPC server, an
actor) never creates one: :func:`service_keys` refuses to start without the addresses, naming the
setting. On a machine without the files a new deposit wallet would be advertised in 402 terms and never
watched; the deposit wallet's secret need not be on any serving machine at all. The fee payer's secret
signs sponsored x402 payments where its file is; where it is not, settlement answers 503; a file that
holds another key stops start-up.
"""

from __future__ import annotations

import contextlib
import json
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypedDict

from solders.keypair import Keypair
from solders.pubkey import Pubkey

from gateway.core.errors import ConfigError

DEPOSIT_WALLET = "keys/deposit-wallet.json"
FEE_PAYER = "keys/fee-payer.json"
#: How start-up errors name the settings (the environment variable, then the config file's name).
DEPOSIT_SETTING = "GATEWAY_DEPOSIT_ADDRESS (deposit_address)"
FEE_PAYER_SETTING = "GATEWAY_FEE_PAYER_ADDRESS (fee_payer_address)"


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
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)  # private: gateway/runtime/private_files.py
    keypair = Keypair()
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".key-")  # created 0600: private before it holds the key
    try:
        with os.fdopen(fd, "w") as f:
            json.dump(list(bytes(keypair)), f)
        os.link(tmp, path)
    except FileExistsError:
        return load_keypair(path)
    finally:
        os.unlink(tmp)
    return keypair


def write_private(path: Path, text: str) -> None:
    """Write a secret to ``path``, readable by its owner only from the moment it exists.

    Written to a temporary file created 0600 beside it (never a chmod after writing, which leaves the
    secret readable by others meanwhile), then renamed over it: the secret goes into a new file, so a
    reader that had the old file open (when it was open to others) cannot read the new one.
    """
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".private-")
    try:
        with os.fdopen(fd, "w") as f:
            f.write(text)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise


@dataclass(frozen=True, slots=True)
class ServiceKeys:
    """The service keys one process serves."""

    deposit: Pubkey
    fee_payer: Pubkey | None  # None only with x402 settlement off and no fee payer configured
    signer: Keypair | None  # the fee payer's secret, when this machine holds its file
    fee_payer_file: Path

    def view(self, mismatch: str | None = None) -> dict[str, Any]:
        """``/health``'s ``keys`` object; ``mismatch``: how they differ from the cluster's, if they do."""
        return {
            "deposit_address": str(self.deposit),
            "fee_payer_address": str(self.fee_payer) if self.fee_payer is not None else None,
            "fee_payer_key_here": self.signer is not None,
            "mismatch": mismatch,
        }


def configured_address(value: str | None, setting: str, file: Path) -> Pubkey:
    """A service key's configured public key; :class:`ConfigError` naming ``setting`` when there is none."""
    if not value:
        raise ConfigError(
            f"{setting} is not set: a serving process never creates a service key. gateway up creates {file} "
            "and hands its public key to every process it starts; a process started otherwise must be given it"
        )
    return Pubkey.from_string(value)


def fee_payer_signer(path: Path, address: Pubkey) -> Keypair | None:
    """The fee payer's keypair from ``path`` (None when this machine has no such file, never created);
    :class:`ConfigError` naming the setting and the file when the file is not that key."""
    if not path.exists():
        return None
    try:
        keypair = load_keypair(path)
    except (OSError, ValueError) as exc:
        raise ConfigError(f"{FEE_PAYER_SETTING} is {address}, but {path} cannot be read as its key: {exc}") from exc
    if keypair.pubkey() != address:
        raise ConfigError(
            f"{FEE_PAYER_SETTING} is {address}, but {path} holds {keypair.pubkey()}: set the address of the key "
            "in that file, or remove the file from this machine (it then serves no sponsored payment)"
        )
    return keypair


def service_keys(
    home: Path, deposit_address: str | None, fee_payer_address: str | None, *, fee_payer_needed: bool
) -> ServiceKeys:
    """The keys a serving process serves: the configured addresses, and the fee payer's secret where its
    file is. Reads, never creates. ``fee_payer_needed``: x402 settlement is on (its terms name the fee payer)."""
    deposit = configured_address(deposit_address, DEPOSIT_SETTING, home / DEPOSIT_WALLET)
    path = home / FEE_PAYER
    if not fee_payer_address and not fee_payer_needed:
        return ServiceKeys(deposit, None, None, path)
    fee_payer = configured_address(fee_payer_address, FEE_PAYER_SETTING, path)
    return ServiceKeys(deposit, fee_payer, fee_payer_signer(path, fee_payer), path)


def ensure_service_keys(home: Path) -> dict[str, str]:
    """Create the service's keys if missing; return their public keys by file name. For ``gateway up``
    (and the tests standing in for it), never for a serving process."""
    return {name: str(load_or_create_keypair(home / name).pubkey()) for name in (DEPOSIT_WALLET, FEE_PAYER)}


class ServiceKeyAddresses(TypedDict):
    deposit_address: str
    fee_payer_address: str


def service_key_addresses(home: Path) -> ServiceKeyAddresses:
    """The settings ``deposit_address`` and ``fee_payer_address`` of the keys in ``home``, created if
    missing: what ``gateway up`` hands every process, for whatever stands in for it (tests, benchmarks)."""
    keys = ensure_service_keys(home)
    return {"deposit_address": keys[DEPOSIT_WALLET], "fee_payer_address": keys[FEE_PAYER]}

"""Signed transactions as clients send them: decode, size, verify, and read what the gateway needs. Pure.

Send methods are checked before billing: a transaction that cannot be decoded, is over the size
limit of its version, or lacks a valid signature for any required signer is refused with -32602 and
never charged. Lengths are bounded before decoding (base58 decoding costs the square of its input).
"""

from __future__ import annotations

import base64
import binascii
from dataclasses import dataclass
from typing import Any

import base58
from solders.message import MessageV0, MessageV1
from solders.pubkey import Pubkey
from solders.transaction import VersionedTransaction

#: Wire size limits by version (bytes).
MAX_LEGACY_V0_BYTES = 1_232
MAX_V1_BYTES = 4_096
_MAX_ENCODED = 4 * MAX_V1_BYTES // 3 + 8  # base64 of the largest; base58 is about 1.37x, checked below
COMPUTE_BUDGET = Pubkey.from_string("ComputeBudget111111111111111111111111111111")
SYSTEM_PROGRAM = Pubkey.from_string("11111111111111111111111111111111")
_SET_CU_PRICE = 3
_SYSTEM_TRANSFER = 2


@dataclass(frozen=True, slots=True)
class WireTx:
    """A decoded, size-checked, fully signed transaction."""

    raw: bytes
    tx: VersionedTransaction
    version: int | None  # None for legacy

    @property
    def signature(self) -> str:
        return str(self.tx.signatures[0])

    @property
    def base64(self) -> str:
        return base64.b64encode(self.raw).decode("ascii")

    @property
    def blockhash(self) -> str:
        """Its recent blockhash: once that is no longer valid the transaction can never land."""
        return str(self.tx.message.recent_blockhash)


def decode_transaction(encoded: Any, encoding: str | None = None) -> WireTx | str:
    """The transaction, or why it is refused. ``encoding`` "base64" or "base58"; None tries base64
    then base58 (a client of ``sendSmartTransaction`` may send either)."""
    if not isinstance(encoded, str) or not encoded:
        return "the transaction must be a non-empty base64 or base58 string"
    if len(encoded) > _MAX_ENCODED * 2:
        return f"the transaction is larger than {MAX_V1_BYTES} bytes"
    if encoding not in (None, "base64", "base58"):
        return "encoding must be base64 or base58"
    raw = _decode(encoded, encoding)
    if raw is None:
        return f"the transaction is not valid {encoding or 'base64 or base58'}"
    return parse_transaction(raw)


def _decode(encoded: str, encoding: str | None) -> bytes | None:
    if encoding in (None, "base64"):
        try:
            raw = base64.b64decode(encoded, validate=True)
            if encoding == "base64" or _parses(raw):
                return raw
        except (binascii.Error, ValueError):
            if encoding == "base64":
                return None
    try:
        return base58.b58decode(encoded)
    except ValueError:
        return None


def _parses(raw: bytes) -> bool:
    try:
        VersionedTransaction.from_bytes(raw)
    except Exception:  # solders raises its own error types for malformed bytes
        return False
    return True


def parse_transaction(raw: bytes) -> WireTx | str:
    try:
        tx = VersionedTransaction.from_bytes(raw)
    except Exception:
        return "the bytes are not a Solana transaction"
    message = tx.message
    version = 1 if isinstance(message, MessageV1) else 0 if isinstance(message, MessageV0) else None
    limit = MAX_V1_BYTES if version == 1 else MAX_LEGACY_V0_BYTES
    if len(raw) > limit:
        return f"the transaction is {len(raw)} bytes; the limit for its version is {limit}"
    try:
        tx.sanitize()
    except Exception:
        return "the transaction is malformed (its message does not sanitize)"
    required = message.header.num_required_signatures
    if len(tx.signatures) != required:
        return f"the transaction has {len(tx.signatures)} signatures; its message requires {required}"
    failed = [i for i, ok in enumerate(tx.verify_with_results()) if not ok]
    if failed:
        signers = ", ".join(str(message.account_keys[i]) for i in failed)
        return f"missing or invalid signature of {signers}: sign the transaction before sending it"
    return WireTx(raw, tx, version)


def writable_accounts(encoded: Any, encoding: str) -> list[str] | str:
    """The writable keys of a transaction's message (signed or not), or why it cannot be read.

    Only the message's own keys: accounts an address lookup table loads are not resolved here."""
    if not isinstance(encoded, str) or not encoded:
        return f"the transaction must be a non-empty {encoding} string"
    if len(encoded) > _MAX_ENCODED * 2:
        return f"the transaction is larger than {MAX_V1_BYTES} bytes"
    raw = _decode(encoded, encoding)
    if raw is None:
        return f"the transaction is not valid {encoding}"
    try:
        message = VersionedTransaction.from_bytes(raw).message
    except Exception:  # solders raises its own error types for malformed bytes
        return "the bytes are not a Solana transaction"
    header = message.header
    keys = message.account_keys
    signers = header.num_required_signatures
    if not 0 < signers <= len(keys) or header.num_readonly_signed_accounts >= signers:
        return "the transaction's message header does not match its account keys"
    return [
        str(key)
        for i, key in enumerate(keys)
        if i < signers - header.num_readonly_signed_accounts
        or signers <= i < len(keys) - header.num_readonly_unsigned_accounts
    ]


def compute_unit_price(tx: VersionedTransaction) -> int:
    """The micro-lamports per compute unit the transaction pays (0 without SetComputeUnitPrice)."""
    keys = tx.message.account_keys
    for ix in tx.message.instructions:
        if keys[ix.program_id_index] == COMPUTE_BUDGET and ix.data[:1] == bytes([_SET_CU_PRICE]) and len(ix.data) == 9:
            return int.from_bytes(ix.data[1:9], "little")
    return 0


def tips(tx: VersionedTransaction, tip_accounts: frozenset[str]) -> int:
    """Lamports the transaction's top-level System transfers send to any of ``tip_accounts``."""
    message = tx.message
    keys = message.account_keys
    total = 0
    for ix in message.instructions:
        data = bytes(ix.data)
        if (
            keys[ix.program_id_index] != SYSTEM_PROGRAM
            or len(data) != 12
            or data[:4] != _SYSTEM_TRANSFER.to_bytes(4, "little")
        ):
            continue
        if len(ix.accounts) >= 2 and ix.accounts[1] < len(keys) and str(keys[ix.accounts[1]]) in tip_accounts:
            total += int.from_bytes(data[4:12], "little")
    return total

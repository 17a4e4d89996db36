"""Bundles as the block engine takes them (Jito's JSON-RPC shape), checked before billing. Pure.

A bundle is 1 to 5 signed transactions, executed in order and all-or-nothing, and it must tip: a
System transfer of at least 1,000 lamports to one of the block engine's tip accounts, in a top-level
instruction (tip accounts must not be reached through lookup tables). A bundle that does not tip is
refused before it is billed, since the block engine would drop it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from gateway.core.transactions import WireTx, decode_transaction, tips

MAX_BUNDLE = 5
MIN_TIP_LAMPORTS = 1_000
#: The mainnet block engine's tip accounts (``getTipAccounts``); the devnode's block engine uses the same.
TIP_ACCOUNTS = frozenset(
    {
        "96gYZGLnJYVFmbjzopPSU6QiEV5fGqZNyN9nmNhvrZU5",
        "HFqU5x63VTqvQss8hp11i4wVV8bD44PvwucfZ2bU7gRe",
        "Cw8CFyM9FkoMi7K7Crf6HNQqf4uEMzpKw6QNghXLvLkY",
        "ADaUMid9yfUytqMBgopwjb2DTLSokTSzL1zt6iGPaS49",
        "DfXygSm4jCyNCybVYYK6DwvWqjKee8pbDmJGcLWNDXjh",
        "ADuUkR4vqLUMWXxW9gh6D6L8pMSawimctcNZ5pGwDcEt",
        "DttWaMuVvTiduZRnguLF7jNxTgiMBZ1hyAumKUiL2KRL",
        "3AVi9Tg9Uo68tJfuvoKvqKNWKkC5wPdSSdeBnizKZ6jT",
    }
)


@dataclass(frozen=True, slots=True)
class Bundle:
    """A bundle's transactions, in order, decoded and verified (:func:`check_bundle`)."""

    txs: tuple[WireTx, ...]


def bundle_encoding(params: list[Any]) -> str | None:
    """``params[1].encoding`` of ``sendBundle``: base58 (the block engine's default) or base64."""
    config = params[1] if len(params) > 1 and isinstance(params[1], dict) else {}
    encoding = config.get("encoding", "base58")
    return encoding if encoding in ("base58", "base64") else None


def check_bundle(params: list[Any], tip_accounts: frozenset[str] = TIP_ACCOUNTS) -> list[WireTx] | str:
    """The bundle's transactions, decoded and verified, or why it is refused."""
    txs = params[0] if params else None
    if not isinstance(txs, list) or not 1 <= len(txs) <= MAX_BUNDLE:
        return f"sendBundle params are [[<signed tx>, ... up to {MAX_BUNDLE}], {{encoding?}}]"
    encoding = bundle_encoding(params)
    if encoding is None:
        return "encoding must be base58 or base64"
    decoded: list[WireTx] = []
    for n, encoded in enumerate(txs):
        tx = decode_transaction(encoded, encoding)
        if isinstance(tx, str):
            return f"transaction {n}: {tx}"
        decoded.append(tx)
    if len({tx.signature for tx in decoded}) != len(decoded):
        return "the bundle holds the same transaction twice"
    tipped = sum(tips(tx.tx, tip_accounts) for tx in decoded)
    if tipped < MIN_TIP_LAMPORTS:
        return (
            f"the bundle must tip one of the tip accounts at least {MIN_TIP_LAMPORTS} lamports "
            "(a top-level System transfer; see getTipAccounts)"
        )
    return decoded

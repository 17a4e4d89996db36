"""Which USDC transfers into the deposit address a transaction carries. Pure: no I/O, no database.

Input is a ``getTransaction`` result in ``jsonParsed`` encoding (``maxSupportedTransactionVersion`` 0).
A deposit is a top-level or inner SPL Token / Token-2022 ``transfer`` or ``transferChecked`` whose
destination is the deposit wallet's USDC associated token account (ATA). docs/api.md's funding rule
attributes it to the transfer's *authority* (the wallet that signed for the tokens), not to the fee
payer and not to whoever later asks for it to be confirmed.

Why the checks:

- ``transferChecked`` names its mint, which must be the configured USDC mint.
- plain ``transfer`` names no mint. The destination being the USDC ATA settles it (that address is a
  PDA of (wallet, token program, USDC mint), so the ATA program only ever creates it for USDC), but
  the token-balance records of the transaction are checked too, so a foreign mint is refused even
  if that reasoning were ever wrong (e.g. a misconfigured ATA address).
- a failed transaction (``meta.err``) moved nothing: it is never credited.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from solders.pubkey import Pubkey

TOKEN_PROGRAM_ID = "TokenkegQfeZyiNwAJbNbGKPFXCWuBvf9Ss623VQ5DA"
TOKEN_2022_PROGRAM_ID = "TokenzQdBNbLqP5VEhdkAS6EPFLC1PHnBqCXEpPxuEb"
ASSOCIATED_TOKEN_PROGRAM_ID = "ATokenGPvbdGVxr1b2hvZbsiqW5xWH25efTNsLJA8knL"
TOKEN_PROGRAMS = frozenset({TOKEN_PROGRAM_ID, TOKEN_2022_PROGRAM_ID})
TRANSFER_TYPES = frozenset({"transfer", "transferChecked"})

# Reasons a transaction gave no deposit; confirm-deposit shows them in its 400 answers.
REASON_FAILED = "the transaction failed on chain; nothing was transferred"
REASON_NO_TRANSFER = "no USDC transfer to the deposit address in this transaction"
REASON_WRONG_MINT = "the transfer to the deposit address is not of the accepted USDC mint"
REASON_MALFORMED = "the transaction could not be read (expected jsonParsed encoding)"


def deposit_token_account(deposit_wallet: Pubkey, mint: Pubkey) -> Pubkey:
    """The deposit wallet's associated token account for ``mint`` under the (classic) SPL Token program.

    USDC is an SPL Token mint, so its ATA is derived with the classic token program id.
    """
    ata, _bump = Pubkey.find_program_address(
        [bytes(deposit_wallet), bytes(Pubkey.from_string(TOKEN_PROGRAM_ID)), bytes(mint)],
        Pubkey.from_string(ASSOCIATED_TOKEN_PROGRAM_ID),
    )
    return ata


@dataclass(frozen=True)
class DepositTransfer:
    """One token transfer into the deposit ATA, in base units, attributed to its authority wallet."""

    authority: str
    amount_base_units: int
    source: str
    kind: str  # "transfer" | "transferChecked"
    program_id: str
    location: str  # "3" for top-level instruction 3, "3.1" for inner instruction 1 under it
    multisig: bool = False  # the authority is an SPL multisig account (its signers signed)

    def unsignable(self) -> str | None:
        """Why credits for this authority could never be used, or None: credits belong to the wallet
        that moved the tokens, and a multisig account or a program-derived address cannot sign
        requests, so its credits would be stranded. Such a deposit is recorded, not credited."""
        if self.multisig:
            return f"the transfer's authority {self.authority} is a multisig account, which cannot sign for credits"
        if not Pubkey.from_string(self.authority).is_on_curve():
            return f"the transfer's authority {self.authority} is a program address, which cannot sign for credits"
        return None


@dataclass(frozen=True)
class DepositScan:
    """The transfers found, or (when there are none) why not."""

    transfers: list[DepositTransfer] = field(default_factory=list)
    reason: str | None = None


def extract_deposits(tx: Mapping[str, Any] | None, deposit_ata: str, usdc_mint: str) -> list[DepositTransfer]:
    """The USDC transfers into ``deposit_ata`` carried by ``tx`` (see :func:`scan_deposits` for the reason)."""
    return scan_deposits(tx, deposit_ata, usdc_mint).transfers


def scan_deposits(tx: Mapping[str, Any] | None, deposit_ata: str, usdc_mint: str) -> DepositScan:
    """Every USDC ``transfer`` / ``transferChecked`` into ``deposit_ata``, top-level and inner, in order."""
    if not isinstance(tx, Mapping):
        return DepositScan(reason=REASON_MALFORMED)
    meta = tx.get("meta")
    transaction = tx.get("transaction")
    if not isinstance(meta, Mapping) or not isinstance(transaction, Mapping):
        return DepositScan(reason=REASON_MALFORMED)
    if meta.get("err") is not None:
        return DepositScan(reason=REASON_FAILED)

    destination_mints = _balance_mints(tx, deposit_ata)
    foreign_balance = any(mint != usdc_mint for mint in destination_mints)
    found: list[DepositTransfer] = []
    wrong_mint = False
    for location, ix in _instructions(transaction, meta):
        if ix.get("programId") not in TOKEN_PROGRAMS:
            continue
        parsed = ix.get("parsed")
        if not isinstance(parsed, Mapping) or parsed.get("type") not in TRANSFER_TYPES:
            continue
        info = parsed.get("info")
        if not isinstance(info, Mapping) or info.get("destination") != deposit_ata:
            continue
        kind = str(parsed["type"])
        if foreign_balance or (kind == "transferChecked" and info.get("mint") != usdc_mint):
            wrong_mint = True
            continue
        amount = _amount(info)
        authority = info.get("authority") or info.get("multisigAuthority")
        if amount is None or not isinstance(authority, str) or not _is_pubkey(authority):
            continue
        source = info.get("source")
        found.append(
            DepositTransfer(
                authority=authority,
                amount_base_units=amount,
                source=source if isinstance(source, str) else "",
                kind=kind,
                program_id=str(ix["programId"]),
                location=location,
                multisig="multisigAuthority" in info,
            )
        )
    if found:
        return DepositScan(transfers=found)
    return DepositScan(reason=REASON_WRONG_MINT if wrong_mint else REASON_NO_TRANSFER)


def _is_pubkey(value: str) -> bool:
    try:
        Pubkey.from_string(value)
    except ValueError:
        return False
    return True


def _instructions(transaction: Mapping[str, Any], meta: Mapping[str, Any]) -> Iterator[tuple[str, Mapping[str, Any]]]:
    """Top-level instructions, each followed by the inner instructions it invoked."""
    message = transaction.get("message")
    top = message.get("instructions") if isinstance(message, Mapping) else None
    inner_by_index: dict[int, list[Any]] = {}
    for group in meta.get("innerInstructions") or []:
        if isinstance(group, Mapping) and isinstance(group.get("index"), int):
            inner_by_index.setdefault(group["index"], []).extend(group.get("instructions") or [])
    for i, ix in enumerate(top if isinstance(top, list) else []):
        if isinstance(ix, Mapping):
            yield str(i), ix
        for j, inner in enumerate(inner_by_index.get(i, [])):
            if isinstance(inner, Mapping):
                yield f"{i}.{j}", inner


def _amount(info: Mapping[str, Any]) -> int | None:
    """Base units from ``info.amount`` (transfer) or ``info.tokenAmount.amount`` (transferChecked)."""
    raw = info.get("amount")
    if raw is None:
        token_amount = info.get("tokenAmount")
        raw = token_amount.get("amount") if isinstance(token_amount, Mapping) else None
    if isinstance(raw, bool):
        return None
    if isinstance(raw, int):
        return raw if raw >= 0 else None
    if isinstance(raw, str) and raw.isdigit():
        return int(raw)
    return None


def _account_keys(tx: Mapping[str, Any]) -> list[str]:
    """Account keys in index order (jsonParsed lists lookup-table keys inline; json lists them in meta)."""
    transaction = tx.get("transaction") or {}
    message = transaction.get("message") if isinstance(transaction, Mapping) else None
    raw = message.get("accountKeys") if isinstance(message, Mapping) else None
    keys: list[str] = []
    parsed_form = False
    for entry in raw if isinstance(raw, list) else []:
        if isinstance(entry, Mapping):
            parsed_form = True
            keys.append(str(entry.get("pubkey")))
        else:
            keys.append(str(entry))
    meta = tx.get("meta") or {}
    loaded = meta.get("loadedAddresses") if isinstance(meta, Mapping) else None
    if not parsed_form and isinstance(loaded, Mapping):
        keys.extend(str(k) for k in loaded.get("writable") or [])
        keys.extend(str(k) for k in loaded.get("readonly") or [])
    return keys


def _balance_mints(tx: Mapping[str, Any], account: str) -> set[str]:
    """Mints the pre/post token balance records give for ``account`` (empty if it has none)."""
    keys = _account_keys(tx)
    meta = tx.get("meta") or {}
    mints: set[str] = set()
    for name in ("preTokenBalances", "postTokenBalances"):
        for bal in (meta.get(name) if isinstance(meta, Mapping) else None) or []:
            if not isinstance(bal, Mapping):
                continue
            index = bal.get("accountIndex")
            if isinstance(index, int) and 0 <= index < len(keys) and keys[index] == account:
                mints.add(str(bal.get("mint")))
    return mints

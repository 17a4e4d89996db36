"""Which transactions ``POST /x402/settle`` accepts, and the service's co-signature. Pure: no I/O.

A settlement is a partially or fully signed Solana transaction (legacy, v0 or v1) that pays the
deposit wallet: a token ``Transfer`` or ``TransferChecked`` of the accepted USDC mint into the deposit
wallet's associated token account (ATA), at least the minimum deposit per authority wallet. The
payment is found by the same parser that credits deposits (:func:`gateway.core.deposits.scan_deposits`):
the top-level token instructions are rendered as a node's ``jsonParsed`` answer would show them, so
what settle accepts is exactly what confirm-deposit later credits, to the same authority wallet.

Two paths, told apart by the fee payer (the first account key):

* **self-paid**: the caller's wallet pays the fee; every signature must already be there, and the
  transaction is sent as it is (any other instructions are the caller's business).
* **sponsored**: the fee payer is the service's key (``extra.feePayer`` of the payment terms), whose
  signature slot the service fills in. The sponsor's exposure must stay the fee, so
  :func:`sponsor_violation` allows, on ``POST /x402/settle`` (docs/api.md's rule), the one
  ``TransferChecked`` alone; on the x402 header path (``PAYMENT-SIGNATURE``, given :class:`ComputeCaps`)
  also at most one ``SetComputeUnitLimit`` and one ``SetComputeUnitPrice`` under the caps and one
  ``Memo`` without accounts: exactly the x402 SDK's transaction. On both, the fee payer may appear in no
  instruction at all (so it is no transfer's source or authority, no account closed to or from,
  writable nowhere but as fee payer), only it and the transfer authority sign (each signature costs
  the fee payer 5,000 lamports), and no address lookup table may load accounts (they cannot be
  checked without reading the chain).
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

import orjson
from solders.instruction import CompiledInstruction
from solders.keypair import Keypair
from solders.message import MessageV0, MessageV1, to_bytes_versioned
from solders.pubkey import Pubkey
from solders.transaction import VersionedTransaction

from gateway.core.deposits import TOKEN_PROGRAMS, DepositTransfer, scan_deposits
from gateway.core.transactions import (
    COMPUTE_BUDGET,
    MAX_LEGACY_V0_BYTES,
    MAX_V1_BYTES,
    SYSTEM_PROGRAM,
    WireTx,
    parse_transaction,
)

MEMO_PROGRAM = Pubkey.from_string("MemoSq4gqABAXKb96qnH8TysNcWxMyWCqXgDLGmfcHr")
#: The x402 SDK's bound on a memo (its ``MAX_MEMO_BYTES``).
MAX_MEMO_BYTES = 256
#: The largest body the route reads: a base64 transaction of the largest version in a small JSON object.
MAX_BODY_BYTES = 8 * 1024

_TRANSFER = 3
_TRANSFER_CHECKED = 12
_SET_CU_LIMIT = 2
_SET_CU_PRICE = 3
_MAX_ENCODED = 4 * MAX_V1_BYTES // 3 + 4
_PROGRAM_NAMES = {
    str(SYSTEM_PROGRAM): "System Program",
    str(COMPUTE_BUDGET): "Compute Budget",
    str(MEMO_PROGRAM): "Memo",
    **{program: "SPL Token" for program in TOKEN_PROGRAMS},
}
BODY_SHAPE = '{"transaction": "<base64 transaction>"}'


class Reason(StrEnum):
    """Why a settlement is refused (400); ``error.data.reason`` of the answer."""

    UNPARSEABLE_BODY = "unparseable_body"
    INVALID_BASE64 = "invalid_base64"
    INVALID_TRANSACTION = "invalid_transaction"
    WRONG_DESTINATION = "wrong_destination"
    WRONG_MINT = "wrong_mint"
    AMOUNT_BELOW_MINIMUM = "amount_below_minimum"
    NO_PAYMENT_INSTRUCTION = "no_payment_instruction"
    UNSIGNABLE_AUTHORITY = "unsignable_authority"
    SPONSORED_WHITELIST = "sponsored_whitelist_violation"
    MISSING_SIGNATURE = "missing_signature"
    # the x402 header path (PAYMENT-SIGNATURE / X-PAYMENT) only
    INVALID_PAYMENT_HEADER = "invalid_payment_header"
    UNSUPPORTED_SCHEME = "unsupported_scheme"
    NETWORK_MISMATCH = "network_mismatch"
    SEVERAL_PAYERS = "several_payers"


@dataclass(frozen=True, slots=True)
class Refusal:
    reason: Reason
    message: str


@dataclass(frozen=True, slots=True)
class SettleRules:
    """What a payment must look like here: from the service's keys and settings."""

    deposit_wallet: str  # ``payTo``
    deposit_ata: str  # its USDC associated token account
    usdc_mint: str
    fee_payer: Pubkey  # ``extra.feePayer``
    minimum_base_units: int


@dataclass(frozen=True, slots=True)
class ComputeCaps:
    """The ceilings of the compute-budget instructions a sponsored payment may carry on the x402 header
    path (the SDK asks for 20,000 units at 1 micro-lamport): they bound the priority fee the sponsor pays."""

    units: int
    price_micro_lamports: int


@dataclass(frozen=True, slots=True)
class Payment:
    """A transaction that pays the deposit wallet enough; ``tx`` as received (sponsored: not co-signed)."""

    tx: VersionedTransaction
    sponsored: bool
    transfers: tuple[DepositTransfer, ...]

    @property
    def amount_base_units(self) -> int:
        return sum(t.amount_base_units for t in self.transfers)

    @property
    def authorities(self) -> tuple[str, ...]:
        """The wallets confirm-deposit will credit, in order of first appearance."""
        return tuple(dict.fromkeys(t.authority for t in self.transfers))


# ------------------------------------------------------------------------------------------ decoding


def read_body(body: bytes) -> str | Refusal:
    """The ``transaction`` string of a ``{transaction}`` body (other fields are ignored)."""
    try:
        document = orjson.loads(body) if body else None
    except orjson.JSONDecodeError:
        return Refusal(Reason.UNPARSEABLE_BODY, f"the body must be JSON: {BODY_SHAPE}")
    encoded = document.get("transaction") if isinstance(document, dict) else None
    if not isinstance(encoded, str) or not encoded:
        return Refusal(Reason.UNPARSEABLE_BODY, f"the body must be {BODY_SHAPE}")
    return encoded


def decode_transaction(encoded: str) -> VersionedTransaction | Refusal:
    """The transaction, size-checked and sanitized, with one signature slot per required signer."""
    if len(encoded) > _MAX_ENCODED:
        return Refusal(Reason.INVALID_TRANSACTION, f"the transaction is larger than {MAX_V1_BYTES} bytes")
    try:
        raw = base64.b64decode(encoded, validate=True)
    except (binascii.Error, ValueError):
        return Refusal(Reason.INVALID_BASE64, "transaction is not valid base64 (standard alphabet, with padding)")
    try:
        tx = VersionedTransaction.from_bytes(raw)
    except Exception:  # solders raises its own error types for malformed bytes
        return Refusal(Reason.INVALID_TRANSACTION, "transaction does not decode to a Solana transaction")
    limit = MAX_V1_BYTES if isinstance(tx.message, MessageV1) else MAX_LEGACY_V0_BYTES
    if len(raw) > limit:
        return Refusal(
            Reason.INVALID_TRANSACTION, f"the transaction is {len(raw)} bytes; its version's limit is {limit}"
        )
    try:
        tx.sanitize()
    except Exception:
        return Refusal(Reason.INVALID_TRANSACTION, "the transaction is malformed (its message does not sanitize)")
    required = tx.message.header.num_required_signatures
    if len(tx.signatures) != required:
        return Refusal(
            Reason.INVALID_TRANSACTION,
            f"the transaction has {len(tx.signatures)} signature slots; its message requires {required}",
        )
    return tx


# ------------------------------------------------------------------------------------------- payment


def check_payment(tx: VersionedTransaction, rules: SettleRules) -> Payment | Refusal:
    """The payment ``tx`` makes, or why it is not one (both paths; sponsored rules come after)."""
    keys = _static_keys(tx)
    views = [_token_view(keys, ix) for ix in tx.message.instructions]
    document = {
        "meta": {"err": None, "innerInstructions": []},
        "transaction": {"message": {"accountKeys": keys, "instructions": views}},
    }
    scan = scan_deposits(document, rules.deposit_ata, rules.usdc_mint)
    if not scan.transfers:
        return _no_payment(views, rules)
    totals: dict[str, int] = {}
    for transfer in scan.transfers:
        totals[transfer.authority] = totals.get(transfer.authority, 0) + transfer.amount_base_units
    for authority, amount in totals.items():
        if amount < rules.minimum_base_units:
            return Refusal(
                Reason.AMOUNT_BELOW_MINIMUM,
                f"the payment of {amount} base units ({_usdc(amount)} USDC) from {authority} is below the minimum "
                f"of {rules.minimum_base_units} ({_usdc(rules.minimum_base_units)} USDC)",
            )
    for transfer in scan.transfers:
        unsignable = transfer.unsignable()
        if unsignable is not None:
            return Refusal(Reason.UNSIGNABLE_AUTHORITY, f"{unsignable}; pay from a wallet's own key")
    sponsored = bool(keys) and keys[0] == str(rules.fee_payer)
    return Payment(tx, sponsored, tuple(scan.transfers))


def _no_payment(views: Sequence[dict[str, Any]], rules: SettleRules) -> Refusal:
    """Why none of the token transfers pays the deposit wallet: the most specific reason found.

    In order: a transfer into the deposit account of another mint; a USDC transfer elsewhere; a
    transfer of another mint; a transfer naming no mint, elsewhere; no token transfer at all."""
    transfers = [(i, v["parsed"]["info"]) for i, v in enumerate(views) if "parsed" in v]
    into_deposit = [i for i, info in transfers if info.get("destination") == rules.deposit_ata]
    if into_deposit:
        return Refusal(
            Reason.WRONG_MINT, f"instruction {into_deposit[0]} pays the deposit account in a mint other than USDC"
        )
    usdc = [(i, info) for i, info in transfers if info.get("mint") == rules.usdc_mint]
    other_mint = [(i, info) for i, info in transfers if info.get("mint") not in (None, rules.usdc_mint)]
    elsewhere = usdc or ([] if other_mint else transfers)
    if elsewhere:
        i, info = elsewhere[0]
        return Refusal(
            Reason.WRONG_DESTINATION,
            f"instruction {i} transfers to {info.get('destination')}, not to the deposit account "
            f"{rules.deposit_ata} (the USDC associated token account of payTo {rules.deposit_wallet})",
        )
    if other_mint:
        i, info = other_mint[0]
        return Refusal(
            Reason.WRONG_MINT,
            f"instruction {i} transfers mint {info['mint']}; the accepted mint is USDC {rules.usdc_mint}",
        )
    return Refusal(
        Reason.NO_PAYMENT_INSTRUCTION,
        f"no token Transfer or TransferChecked in the transaction: pay with a TransferChecked of at least "
        f"{rules.minimum_base_units} base units of USDC {rules.usdc_mint} to {rules.deposit_ata}",
    )


def _static_keys(tx: VersionedTransaction) -> list[str]:
    return [str(key) for key in tx.message.account_keys]


def _token_view(keys: Sequence[str], ix: CompiledInstruction) -> dict[str, Any]:
    """A top-level instruction as ``getTransaction`` (jsonParsed) shows it: token transfers parsed,
    anything else by program id only. An account loaded from a lookup table is unknown here (None)."""
    program = keys[ix.program_id_index]
    view: dict[str, Any] = {"programId": program}
    data = bytes(ix.data)
    accounts = [keys[i] if i < len(keys) else None for i in ix.accounts]
    if program not in TOKEN_PROGRAMS or not data:
        return view
    if data[0] == _TRANSFER and len(data) == 9 and len(accounts) >= 3:
        info: dict[str, Any] = {"source": accounts[0], "destination": accounts[1], "amount": str(_u64(data, 1))}
        kind, signers = "transfer", accounts[2:]
    elif data[0] == _TRANSFER_CHECKED and len(data) == 10 and len(accounts) >= 4:
        amount = {"amount": str(_u64(data, 1)), "decimals": data[9]}
        info = {"source": accounts[0], "mint": accounts[1], "destination": accounts[2], "tokenAmount": amount}
        kind, signers = "transferChecked", accounts[3:]
    else:
        return view
    if len(signers) > 1:  # the token program's multisig form: the authority, then its signers
        info["multisigAuthority"], info["signers"] = signers[0], signers[1:]
    else:
        info["authority"] = signers[0]
    view["parsed"] = {"type": kind, "info": info}
    return view


# ----------------------------------------------------------------------------------------- sponsored


def sponsor_violation(payment: Payment, caps: ComputeCaps | None = None) -> Refusal | None:
    """Why a sponsored transaction could make the fee payer pay more than its fee, or None.

    Without ``caps`` (``POST /x402/settle``) the one TransferChecked is the only instruction allowed;
    with them (the x402 header path) the SDK's compute-budget instructions and memo are too."""
    tx = payment.tx
    message = tx.message
    keys = _static_keys(tx)
    fee_payer = keys[0]
    if fee_payer in payment.authorities:
        return _violation(f"the fee payer {fee_payer} cannot be the transfer authority: the service never pays itself")
    for i, ix in enumerate(message.instructions):
        if ix.program_id_index == 0 or 0 in bytes(ix.accounts):
            return _violation(_fee_payer_use(tx, i, ix))
    if isinstance(message, MessageV0) and message.address_table_lookups:
        return _violation("a sponsored transaction may not load accounts from address lookup tables")
    if isinstance(message, MessageV1) and (message.config.priority_fee or message.config.heap_size is not None):
        return _violation("a sponsored v1 transaction may not set a priority fee or request a heap size")
    signers = keys[: message.header.num_required_signatures]
    if sorted(signers[1:]) != sorted(payment.authorities):
        return _violation(
            f"a sponsored transaction is signed by the fee payer and the transfer authority only; it names "
            f"{len(signers)} signers ({', '.join(signers)})"
        )
    return _instruction_violation(tx, caps)


def _instruction_violation(tx: VersionedTransaction, caps: ComputeCaps | None) -> Refusal | None:
    """The whitelist: one TransferChecked; with ``caps``, at most one of each compute-budget instruction
    and one memo besides."""
    keys = _static_keys(tx)
    seen: set[str] = set()
    for i, ix in enumerate(tx.message.instructions):
        program = keys[ix.program_id_index]
        kind = _allowed_kind(program, bytes(ix.data), bytes(ix.accounts), caps)
        if isinstance(kind, Refusal):
            return _violation(f"instruction {i}: {kind.message}")
        if caps is None and kind not in (None, "TransferChecked"):
            return _violation(
                f"instruction {i} ({_program_name(program)}): POST /x402/settle's sponsored path allows a single "
                "TransferChecked and no other instruction (no compute budget, no memo); the x402 SDK's shape is "
                "accepted when the payment is sent in the PAYMENT-SIGNATURE header of the paid call, or pay the "
                "fee yourself (self-paid)"
            )
        if kind is None:
            return _violation(
                f"instruction {i} ({_program_name(program)}) is not allowed in a sponsored transaction: only one "
                "TransferChecked, with optional SetComputeUnitLimit, SetComputeUnitPrice and Memo (the x402 SDK's "
                "instructions); pay the fee yourself (self-paid) to add others"
            )
        if kind in seen:
            return _violation(f"instruction {i}: a sponsored transaction may carry only one {kind} instruction")
        seen.add(kind)
    return None


def _allowed_kind(program: str, data: bytes, accounts: bytes, caps: ComputeCaps | None) -> str | Refusal | None:
    """The whitelisted kind of one instruction, None when it is not whitelisted, a refusal over a cap."""
    if program in TOKEN_PROGRAMS and data[:1] == bytes([_TRANSFER_CHECKED]):
        return "TransferChecked"
    if program in TOKEN_PROGRAMS and data[:1] == bytes([_TRANSFER]):
        return _violation("a sponsored payment must be a TransferChecked (it names the mint), not a Transfer")
    if program == str(COMPUTE_BUDGET) and data[:1] == bytes([_SET_CU_LIMIT]) and len(data) == 5:
        units = int.from_bytes(data[1:5], "little")
        if caps is not None and units > caps.units:
            return _violation(f"a compute-unit limit of {units} is over the sponsored cap of {caps.units}")
        return "SetComputeUnitLimit"
    if program == str(COMPUTE_BUDGET) and data[:1] == bytes([_SET_CU_PRICE]) and len(data) == 9:
        price = _u64(data, 1)
        if caps is not None and price > caps.price_micro_lamports:
            return _violation(
                f"a compute-unit price of {price} micro-lamports is over the sponsored cap of "
                f"{caps.price_micro_lamports}"
            )
        return "SetComputeUnitPrice"
    if program == str(MEMO_PROGRAM) and not accounts:
        if len(data) > MAX_MEMO_BYTES or not _utf8(data):
            return _violation(f"a memo must be UTF-8 of at most {MAX_MEMO_BYTES} bytes")
        return "Memo"
    return None


def _fee_payer_use(tx: VersionedTransaction, i: int, ix: CompiledInstruction) -> str:
    keys = _static_keys(tx)
    program = keys[ix.program_id_index]
    data = bytes(ix.data)
    what = f"the fee payer {keys[0]} appears in instruction {i} ({_program_name(program)})"
    if program == str(SYSTEM_PROGRAM) and data[:4] == (2).to_bytes(4, "little") and bytes(ix.accounts)[:1] == b"\0":
        what = f"instruction {i} would transfer SOL from the fee payer {keys[0]}"
    elif 0 in bytes(ix.accounts):  # the fee payer is a writable signer: writable wherever it is passed
        what += " as a writable account"
    return f"{what}: a sponsored transaction may use the fee payer only to pay the fee"


def _violation(message: str) -> Refusal:
    return Refusal(Reason.SPONSORED_WHITELIST, message)


def _program_name(program: str) -> str:
    return _PROGRAM_NAMES.get(program, f"program {program}")


# ------------------------------------------------------------------------------------------- signing


def co_sign(tx: VersionedTransaction, fee_payer: Keypair) -> bytes:
    """The wire bytes with the fee payer's signature in slot 0 (the other slots as the caller signed)."""
    message = tx.message
    signatures = [fee_payer.sign_message(to_bytes_versioned(message)), *tx.signatures[1:]]
    return bytes(VersionedTransaction.populate(message, signatures))


def signed_transaction(raw: bytes) -> WireTx | Refusal:
    """The transaction with every required signature valid (the size and shape were checked before)."""
    wire = parse_transaction(raw)
    if isinstance(wire, str):
        return Refusal(Reason.MISSING_SIGNATURE, wire)
    return wire


# ------------------------------------------------------------------------------------------- helpers


def _u64(data: bytes, offset: int) -> int:
    return int.from_bytes(data[offset : offset + 8], "little")


def _utf8(data: bytes) -> bool:
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


def _usdc(base_units: int) -> str:
    """Base units as USDC, exactly: 10000 -> "0.01"."""
    whole, fraction = divmod(base_units, 10**6)
    return f"{whole}.{fraction:06d}".rstrip("0").rstrip(".")

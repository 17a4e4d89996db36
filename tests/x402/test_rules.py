"""The settle rules alone (:mod:`gateway.x402.rules`, pure): which transactions pay, and which sponsored
ones keep the fee payer's exposure to its fee. No chain: blockhashes are the default hash."""

from __future__ import annotations

import base64

import pytest
from solders.compute_budget import request_heap_frame, set_compute_unit_limit, set_compute_unit_price
from solders.hash import Hash
from solders.instruction import AccountMeta, Instruction
from solders.keypair import Keypair
from solders.message import MessageAddressTableLookup, MessageHeader, MessageV0, MessageV1, TransactionConfig
from solders.pubkey import Pubkey
from solders.signature import Signature
from solders.system_program import TransferParams, transfer
from solders.transaction import VersionedTransaction
from spl.token.instructions import create_idempotent_associated_token_account

from gateway.auth.payment_terms import SPONSORED_MAX_COMPUTE_UNIT_PRICE, SPONSORED_MAX_COMPUTE_UNITS
from gateway.core.deposits import deposit_token_account
from gateway.x402.rules import (
    MEMO_PROGRAM,
    ComputeCaps,
    Payment,
    Reason,
    Refusal,
    SettleRules,
    check_payment,
    co_sign,
    decode_transaction,
    read_body,
    signed_transaction,
    sponsor_violation,
)
from tests.chain import USDC_MINT
from tests.x402.helpers import build, pay

DEPOSIT = Keypair().pubkey()
SERVICE = Keypair()
RULES = SettleRules(
    str(DEPOSIT), str(deposit_token_account(DEPOSIT, USDC_MINT)), str(USDC_MINT), SERVICE.pubkey(), 10_000
)
CLIENT = Keypair()
HEADER_PATH = ComputeCaps(SPONSORED_MAX_COMPUTE_UNITS, SPONSORED_MAX_COMPUTE_UNIT_PRICE)  # PAYMENT-SIGNATURE


def decoded(raw: bytes) -> VersionedTransaction:
    tx = decode_transaction(base64.b64encode(raw).decode())
    assert isinstance(tx, VersionedTransaction), tx
    return tx


def verdict(
    ixs: list[Instruction],
    *,
    sponsored: bool = True,
    signers: list[Keypair] | None = None,
    caps: ComputeCaps | None = HEADER_PATH,
) -> Refusal | None:
    """The refusal of a transaction of ``ixs`` (sponsored: the service pays the fee), or None; ``caps``
    None is ``POST /x402/settle``'s rule, the default the x402 header path's."""
    fee_payer = SERVICE.pubkey() if sponsored else CLIENT.pubkey()
    tx = decoded(build(fee_payer, ixs, Hash.default(), signers or [CLIENT]))
    payment = check_payment(tx, RULES)
    if isinstance(payment, Refusal):
        return payment
    assert payment.sponsored is sponsored
    return sponsor_violation(payment, caps) if sponsored else None


def payment(amount: int = 10_000, owner: Pubkey | None = None) -> Instruction:
    return pay(owner or CLIENT.pubkey(), DEPOSIT, amount)


def memo(text: bytes) -> Instruction:
    return Instruction(MEMO_PROGRAM, text, [])


def test_the_sdks_shape_is_accepted_sponsored_on_the_header_path_only() -> None:
    sdk = [set_compute_unit_limit(20_000), set_compute_unit_price(1), payment(), memo(b"0123456789abcdef" * 2)]
    assert verdict(sdk) is None
    assert verdict([payment()]) is None
    refusal = verdict(sdk, caps=None)  # POST /x402/settle: a single TransferChecked (docs/api.md)
    assert refusal is not None and refusal.reason is Reason.SPONSORED_WHITELIST
    assert "allows a single TransferChecked and no other instruction" in refusal.message
    assert verdict([payment(), memo(b"hi")], caps=None) is not None
    assert verdict([payment()], caps=None) is None


def test_self_paid_transactions_may_do_anything_else() -> None:
    create = create_idempotent_associated_token_account(CLIENT.pubkey(), DEPOSIT, USDC_MINT)
    sol = transfer(TransferParams(from_pubkey=CLIENT.pubkey(), to_pubkey=SERVICE.pubkey(), lamports=5))
    assert verdict([create, set_compute_unit_price(10**9), payment(), sol], sponsored=False) is None


def test_the_minimum_is_per_authority_over_its_transfers() -> None:
    assert verdict([payment(5_000), payment(5_000)], sponsored=False) is None  # credited as one deposit of 10,000
    other = Keypair()
    refusal = verdict([payment(10_000), payment(9_000, other.pubkey())], sponsored=False, signers=[CLIENT, other])
    assert (
        refusal is not None and refusal.reason is Reason.AMOUNT_BELOW_MINIMUM and str(other.pubkey()) in refusal.message
    )


def test_a_multisig_authority_is_refused_its_credits_could_never_be_used() -> None:
    signer = Keypair()
    ix = payment()
    multisig = Instruction(ix.program_id, ix.data, [*ix.accounts, AccountMeta(signer.pubkey(), True, False)])
    refusal = verdict([multisig], sponsored=False, signers=[CLIENT, signer])
    assert refusal is not None and refusal.reason is Reason.UNSIGNABLE_AUTHORITY and "multisig" in refusal.message


@pytest.mark.parametrize(
    ("ixs", "words"),
    [
        ([set_compute_unit_limit(SPONSORED_MAX_COMPUTE_UNITS + 1), payment()], "compute-unit limit of 200001 is over"),
        ([set_compute_unit_price(10_001), payment()], "compute-unit price of 10001 micro-lamports is over"),
        ([set_compute_unit_price(1), set_compute_unit_price(2), payment()], "only one SetComputeUnitPrice"),
        ([request_heap_frame(64 * 1024), payment()], "(Compute Budget) is not allowed"),
        ([payment(), payment()], "only one TransferChecked"),
        ([payment(), memo(b"x" * 257)], "a memo must be UTF-8 of at most 256 bytes"),
        ([payment(), memo(b"\xff\xfe")], "a memo must be UTF-8"),
        (
            [payment(), Instruction(MEMO_PROGRAM, b"hi", [AccountMeta(CLIENT.pubkey(), True, False)])],
            "(Memo) is not allowed",
        ),
    ],
)
def test_sponsored_whitelist_and_caps(ixs: list[Instruction], words: str) -> None:
    refusal = verdict(ixs)
    assert refusal is not None and refusal.reason is Reason.SPONSORED_WHITELIST, refusal
    assert words in refusal.message


def test_a_sponsored_transaction_has_no_signer_but_the_fee_payer_and_the_authority() -> None:
    extra = Keypair()
    noop = Instruction(MEMO_PROGRAM, b"hi", [AccountMeta(extra.pubkey(), True, False)])
    refusal = verdict([payment(), noop], signers=[CLIENT, extra])
    assert refusal is not None and "signed by the fee payer and the transfer authority only" in refusal.message


def test_a_sponsored_transaction_loads_nothing_from_lookup_tables() -> None:
    message = MessageV0.try_compile(SERVICE.pubkey(), [payment()], [], Hash.default())
    lookup = MessageAddressTableLookup(Keypair().pubkey(), bytes([0]), b"")
    with_table = MessageV0(
        message.header, message.account_keys, message.recent_blockhash, message.instructions, [lookup]
    )
    tx = VersionedTransaction.populate(with_table, [Signature.default(), Signature.default()])
    found = check_payment(tx, RULES)
    assert isinstance(found, Payment)
    refusal = sponsor_violation(found)
    assert refusal is not None and "address lookup tables" in refusal.message


def test_a_sponsored_v1_transaction_sets_no_priority_fee() -> None:
    legacy = MessageV0.try_compile(SERVICE.pubkey(), [payment()], [], Hash.default())
    for config, refused in ((TransactionConfig(priority_fee=1_000), True), (TransactionConfig(), False)):
        message = MessageV1(MessageHeader(2, 1, 3), config, Hash.default(), legacy.account_keys, legacy.instructions)
        tx = VersionedTransaction.populate(message, [Signature.default(), Signature.default()])
        found = check_payment(tx, RULES)
        assert isinstance(found, Payment) and found.sponsored
        assert (sponsor_violation(found) is not None) is refused


def test_co_signing_fills_the_fee_payer_slot_and_keeps_the_callers() -> None:
    raw = build(SERVICE.pubkey(), [payment()], Hash.default(), [CLIENT])
    tx = decoded(raw)
    assert isinstance(signed_transaction(raw), Refusal)  # the fee payer's slot is empty
    wire = signed_transaction(co_sign(tx, SERVICE))
    assert not isinstance(wire, Refusal), wire
    assert wire.tx.signatures[1] == tx.signatures[1] and wire.tx.message == tx.message
    assert all(wire.tx.verify_with_results())


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        (b'{"transaction": "AQID"}', "AQID"),
        (b'{"transaction": "AQID", "x402Version": 2}', "AQID"),
        (b"", Reason.UNPARSEABLE_BODY),
        (b"null", Reason.UNPARSEABLE_BODY),
        (b'{"transaction": ""}', Reason.UNPARSEABLE_BODY),
        (b"\xff", Reason.UNPARSEABLE_BODY),
    ],
)
def test_read_body(body: bytes, expected: str | Reason) -> None:
    found = read_body(body)
    assert (found.reason if isinstance(found, Refusal) else found) == expected


def test_decode_refuses_oversized_and_short_signed_transactions() -> None:
    assert decode_transaction("A" * 10_000) == Refusal(
        Reason.INVALID_TRANSACTION, "the transaction is larger than 4096 bytes"
    )
    raw = build(SERVICE.pubkey(), [payment()], Hash.default(), [CLIENT])
    one_slot_less = bytes([1]) + raw[1 + 64 :]
    refusal = decode_transaction(base64.b64encode(one_slot_less).decode())
    assert isinstance(refusal, Refusal) and refusal.reason is Reason.INVALID_TRANSACTION

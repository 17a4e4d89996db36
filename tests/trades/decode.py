"""Reading a built transaction back with solders, and the instructions a test expects it to hold."""

from __future__ import annotations

import base64

from solders.instruction import AccountMeta, Instruction
from solders.keypair import Keypair
from solders.message import MessageV0
from solders.pubkey import Pubkey
from solders.signature import Signature
from solders.transaction import VersionedTransaction

from pumpfun.instructions import BUY_ACCOUNT_NAMES, SELL_ACCOUNT_NAMES

FEE_RECIPIENT_AT = BUY_ACCOUNT_NAMES.index("fee_recipient")
BUY_BUYBACK_AT = BUY_ACCOUNT_NAMES.index("buyback_fee_recipient")
SELL_BUYBACK_AT = SELL_ACCOUNT_NAMES.index("buyback_fee_recipient")


def unsigned(encoded: str) -> VersionedTransaction:
    """The builder's transaction: v0, no lookup tables, one all-zero signature (the payer's, to fill in)."""
    tx = VersionedTransaction.from_bytes(base64.b64decode(encoded))
    assert isinstance(tx.message, MessageV0)
    assert list(tx.message.address_table_lookups) == []
    assert tx.message.header.num_required_signatures == 1
    assert list(tx.signatures) == [Signature.default()]
    return tx


def signed_by(encoded: str, keypair: Keypair) -> VersionedTransaction:
    """What the caller does with the answer: sign the message with the wallet's key (solders)."""
    tx = VersionedTransaction(unsigned(encoded).message, [keypair])
    assert all(tx.verify_with_results())
    return tx


def instructions_of(tx: VersionedTransaction) -> list[Instruction]:
    """The message's instructions with the signer and writable flags the message gives each account."""
    message = tx.message
    assert isinstance(message, MessageV0)
    keys = list(message.account_keys)
    out = []
    for compiled in message.instructions:
        metas = [AccountMeta(keys[i], message.is_signer(i), message.is_maybe_writable(i)) for i in compiled.accounts]
        out.append(Instruction(keys[compiled.program_id_index], bytes(compiled.data), metas))
    return out


def assert_same(got: list[Instruction], expected: list[Instruction]) -> None:
    """Same programs, data and accounts in order; every account at least as privileged as expected (a
    message merges an account's flags over all its instructions)."""
    assert [(ix.program_id, bytes(ix.data)) for ix in got] == [(ix.program_id, bytes(ix.data)) for ix in expected]
    for g, e in zip(got, expected, strict=True):
        assert [m.pubkey for m in g.accounts] == [m.pubkey for m in e.accounts], (g, e)
        for gm, em in zip(g.accounts, e.accounts, strict=True):
            assert (gm.is_signer or not em.is_signer) and (gm.is_writable or not em.is_writable), (gm, em)


def payer(tx: VersionedTransaction) -> Pubkey:
    return tx.message.account_keys[0]

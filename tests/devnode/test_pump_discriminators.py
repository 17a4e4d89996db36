"""The documented discriminator arrays agree with Anchor's derivations (sha256 of "global:", "event:",
"account:", "anchor:event")."""

from __future__ import annotations

import hashlib

import pytest

from pumpfun import events, instructions
from pumpfun.accounts import BONDING_CURVE_DISCRIMINATOR, account_discriminator


def sha8(text: str) -> bytes:
    return hashlib.sha256(text.encode()).digest()[:8]


# The arrays as pump-fun/pump-public-docs lists them in idl/pump.json and idl/pump_amm.json.
DOCUMENTED_INSTRUCTIONS = {
    "create": [24, 30, 200, 40, 5, 28, 7, 119],
    "create_v2": [214, 144, 76, 236, 95, 139, 49, 180],
    "buy": [102, 6, 61, 18, 1, 218, 235, 234],
    "buy_exact_sol_in": [56, 252, 116, 8, 158, 223, 205, 95],
    "sell": [51, 230, 133, 164, 1, 127, 131, 173],
    "create_pool": [233, 146, 209, 142, 207, 104, 64, 188],
    "buy_v2": [184, 23, 238, 97, 103, 197, 211, 61],
    "sell_v2": [93, 246, 130, 60, 231, 233, 64, 178],
    "collect_creator_fee": [20, 22, 86, 123, 198, 28, 219, 132],
}
DOCUMENTED_EVENTS = {
    "CreateEvent": [27, 114, 169, 77, 222, 235, 99, 118],
    "TradeEvent": [189, 219, 127, 211, 78, 230, 97, 238],
    "CompleteEvent": [95, 114, 97, 156, 212, 46, 152, 8],
    "CreatePoolEvent": [177, 49, 12, 210, 160, 118, 167, 116],
    "BuyEvent": [103, 244, 82, 31, 44, 245, 119, 119],
    "SellEvent": [62, 47, 55, 10, 165, 3, 220, 42],
}


@pytest.mark.parametrize(("name", "documented"), DOCUMENTED_INSTRUCTIONS.items())
def test_instruction_discriminators_are_sha256_of_global_name(name: str, documented: list[int]) -> None:
    assert sha8(f"global:{name}") == bytes(documented)
    assert instructions.instruction_discriminator(name) == bytes(documented)


@pytest.mark.parametrize(("name", "documented"), DOCUMENTED_EVENTS.items())
def test_event_discriminators_are_sha256_of_event_name(name: str, documented: list[int]) -> None:
    assert sha8(f"event:{name}") == bytes(documented)
    assert events.event_discriminator(name) == bytes(documented)


def test_module_constants_are_the_documented_arrays() -> None:
    assert bytes(DOCUMENTED_INSTRUCTIONS["create"]) == instructions.CREATE_DISCRIMINATOR
    assert bytes(DOCUMENTED_INSTRUCTIONS["create_v2"]) == instructions.CREATE_V2_DISCRIMINATOR
    assert bytes(DOCUMENTED_INSTRUCTIONS["buy"]) == instructions.BUY_DISCRIMINATOR
    assert bytes(DOCUMENTED_INSTRUCTIONS["sell"]) == instructions.SELL_DISCRIMINATOR
    assert bytes(DOCUMENTED_INSTRUCTIONS["create_pool"]) == instructions.CREATE_POOL_DISCRIMINATOR
    assert sha8("global:migrate") == instructions.MIGRATE_DISCRIMINATOR
    assert bytes(DOCUMENTED_EVENTS["CreateEvent"]) == events.CREATE_EVENT_DISCRIMINATOR
    assert bytes(DOCUMENTED_EVENTS["TradeEvent"]) == events.TRADE_EVENT_DISCRIMINATOR
    assert bytes(DOCUMENTED_EVENTS["CompleteEvent"]) == events.COMPLETE_EVENT_DISCRIMINATOR
    assert bytes(DOCUMENTED_EVENTS["CreatePoolEvent"]) == events.CREATE_POOL_EVENT_DISCRIMINATOR
    assert sha8("event:CompletePumpAmmMigrationEvent") == events.COMPLETE_PUMP_AMM_MIGRATION_EVENT_DISCRIMINATOR


def test_bonding_curve_account_discriminator_is_sha256_of_account_name() -> None:
    assert bytes([23, 183, 248, 55, 96, 216, 172, 96]) == BONDING_CURVE_DISCRIMINATOR
    assert account_discriminator("BondingCurve") == BONDING_CURVE_DISCRIMINATOR


def test_event_ix_tag_is_the_little_endian_of_sha256_anchor_event() -> None:
    digest = hashlib.sha256(b"anchor:event").digest()[:8]
    assert int.from_bytes(digest, "big") == 0x1D9ACB512EA545E4
    assert (0x1D9ACB512EA545E4).to_bytes(8, "little") == events.EVENT_IX_TAG_LE
    assert bytes([228, 69, 165, 46, 81, 203, 154, 29]) == events.EVENT_IX_TAG_LE

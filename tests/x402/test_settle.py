"""``POST /x402/settle`` end to end on the real parts: payments built with solders on the session devnode,
settled by a gateway in this process (real PostgreSQL and Redis), then credited by confirm-deposit to the
transfer's authority wallet. Every refusal names its cause and broadcasts nothing."""

from __future__ import annotations

import asyncio
import base64
from collections.abc import Callable
from pathlib import Path

import aiohttp
import asyncpg
import orjson
import pytest
from solders.compute_budget import set_compute_unit_limit, set_compute_unit_price
from solders.instruction import Instruction
from solders.keypair import Keypair
from solders.pubkey import Pubkey
from solders.system_program import TransferParams, transfer
from spl.token.instructions import transfer as token_transfer
from spl.token.models import TransferParams as TokenTransferParams

from devnode.node import Devnode
from gateway.public.documents import capabilities_document
from gateway.x402.rules import MAX_BODY_BYTES
from gateway.x402.store import SettlementStatus, status
from gateway_client import GatewayClient, InvalidRequest
from tests.auth.helpers import request
from tests.chain import airdrop, mint_usdc, usdc_account, wait_confirmed
from tests.support import serve_gateway
from tests.x402.conftest import x402_settings
from tests.x402.helpers import SETTLE, Settle, body, build, confirm_when_final, pay, reason

MAINNET = "solana:5eykt4UsFv8P8NJdTREpY1vzqKqZKvdp"  # the test gateway's network (no name: mainnet)
SIGNATURE_FEE = 5_000


async def test_self_paid_payment_is_settled_then_credited_to_its_authority(x402: Settle, wallet: Keypair) -> None:
    sends = x402.broadcasts
    raw = build(wallet.pubkey(), [pay(wallet.pubkey(), x402.deposit_wallet, 20_000)], await x402.blockhash(), [wallet])
    answer = await x402.settle(body(raw))

    assert answer.status == 200, answer
    doc = answer.json
    assert doc["success"] is True and doc["network"] == MAINNET
    assert "self-paid" in doc["message"] and "/account/confirm-deposit" in doc["message"]
    assert x402.broadcasts == sends + 1
    assert await x402.usdc(wallet.pubkey()) == 1_000_000 - 20_000

    confirmed = await confirm_when_final(x402.url, wallet, doc["transaction"])
    assert confirmed["credited_pubkey"] == str(wallet.pubkey()) and confirmed["credited_to_caller"] is True
    assert confirmed["credits_added"] == 2_000 and confirmed["amount_base_units"] == 20_000


@pytest.mark.parametrize("legacy", [False, True], ids=["v0", "legacy"])
async def test_sponsored_payment_costs_the_service_its_fee_only(x402: Settle, wallet: Keypair, legacy: bool) -> None:
    fee_payer_before = await x402.lamports(x402.fee_payer)
    wallet_before = await x402.lamports(wallet.pubkey())
    payment = [pay(wallet.pubkey(), x402.deposit_wallet, 10_000)]
    raw = build(x402.fee_payer, payment, await x402.blockhash(), [wallet], legacy=legacy)
    answer = await x402.settle(body(raw))

    assert answer.status == 200, answer
    assert "sponsored" in answer.json["message"]
    assert await x402.lamports(x402.fee_payer) == fee_payer_before - 2 * SIGNATURE_FEE  # two signatures
    assert await x402.lamports(wallet.pubkey()) == wallet_before  # the wallet needs no SOL
    record = await status(_pool(x402), answer.json["transaction"])
    assert record is SettlementStatus.CONFIRMED

    confirmed = await confirm_when_final(x402.url, wallet, answer.json["transaction"])
    assert confirmed["credited_pubkey"] == str(wallet.pubkey()) and confirmed["credits_added"] == 1_000


async def test_a_sponsored_settle_is_the_transfer_alone_no_budget_no_memo(x402: Settle, wallet: Keypair) -> None:
    """docs/api.md: this route's sponsored path is a single TransferChecked (the SDK's compute budget and
    memo are accepted in the paid call's PAYMENT-SIGNATURE header instead: test_paid_call.py)."""
    memo = Instruction(Pubkey.from_string("MemoSq4gqABAXKb96qnH8TysNcWxMyWCqXgDLGmfcHr"), b"order 42", [])
    ixs = [set_compute_unit_limit(20_000), set_compute_unit_price(1), pay(wallet.pubkey(), x402.deposit_wallet, 10_000)]
    sends = x402.broadcasts
    for extra in ([*ixs, memo], [ixs[2], memo]):
        answer = await x402.settle(body(build(x402.fee_payer, extra, await x402.blockhash(), [wallet])))
        assert answer.status == 400 and reason(answer) == "sponsored_whitelist_violation", answer
        assert "PAYMENT-SIGNATURE" in answer.json["error"]["message"]
    assert x402.broadcasts == sends


async def test_a_payment_the_caller_already_sent_is_settled(x402: Settle, wallet: Keypair) -> None:
    raw = build(wallet.pubkey(), [pay(wallet.pubkey(), x402.deposit_wallet, 10_000)], await x402.blockhash(), [wallet])
    signature = (await x402.node.send_raw_transaction(raw)).value
    await wait_confirmed(x402.node, signature)

    answer = await x402.settle(body(raw))  # the node answers AlreadyProcessed: it landed, so it is settled
    assert answer.status == 200, answer
    assert answer.json["transaction"] == str(signature)


# ------------------------------------------------------------------------------------------ refusals

Make = Callable[[Settle, Keypair, Pubkey], tuple[Pubkey | None, list[Instruction]]]

REFUSALS: dict[str, tuple[str, str, Make]] = {
    # name: (reason, words of the message, (fee payer: None for the wallet, the instructions))
    "wrong destination": (
        "wrong_destination",
        "not to the deposit account",
        lambda s, w, fp: (None, [pay(w.pubkey(), Keypair().pubkey(), 10_000)]),
    ),
    "wrong mint": (
        "wrong_mint",
        "the accepted mint is USDC",
        lambda s, w, fp: (None, [pay(w.pubkey(), s.deposit_wallet, 10_000, mint=Keypair().pubkey())]),
    ),
    "below minimum": (
        "amount_below_minimum",
        "9999 base units (0.009999 USDC)",
        lambda s, w, fp: (None, [pay(w.pubkey(), s.deposit_wallet, 9_999)]),
    ),
    "no payment instruction": (
        "no_payment_instruction",
        "no token Transfer or TransferChecked",
        lambda s, w, fp: (None, [transfer(TransferParams(from_pubkey=w.pubkey(), to_pubkey=fp, lamports=1))]),
    ),
    "sponsored with an extra instruction": (
        "sponsored_whitelist_violation",
        "(System Program) is not allowed in a sponsored transaction",
        lambda s, w, fp: (
            fp,
            [
                pay(w.pubkey(), s.deposit_wallet, 10_000),
                transfer(TransferParams(from_pubkey=w.pubkey(), to_pubkey=Keypair().pubkey(), lamports=1)),
            ],
        ),
    ),
    "sponsored, fee payer writable elsewhere": (
        "sponsored_whitelist_violation",
        "as a writable account",
        lambda s, w, fp: (
            fp,
            [
                pay(w.pubkey(), s.deposit_wallet, 10_000),
                transfer(TransferParams(from_pubkey=w.pubkey(), to_pubkey=fp, lamports=1)),
            ],
        ),
    ),
    "sponsored, fee payer is the transfer authority": (
        "sponsored_whitelist_violation",
        "cannot be the transfer authority",
        lambda s, w, fp: (fp, [pay(fp, s.deposit_wallet, 10_000)]),
    ),
    "sponsored, fee payer pays a SystemProgram transfer": (
        "sponsored_whitelist_violation",
        "would transfer SOL from the fee payer",
        lambda s, w, fp: (
            fp,
            [
                pay(w.pubkey(), s.deposit_wallet, 10_000),
                transfer(TransferParams(from_pubkey=fp, to_pubkey=w.pubkey(), lamports=1_000_000)),
            ],
        ),
    ),
    "sponsored plain Transfer": (
        "sponsored_whitelist_violation",
        "must be a TransferChecked",
        lambda s, w, fp: (
            fp,
            [
                token_transfer(
                    TokenTransferParams(
                        program_id=Pubkey.from_string("TokenkegQfeZyiNwAJbNbGKPFXCWuBvf9Ss623VQ5DA"),
                        source=usdc_account(w.pubkey()),
                        dest=usdc_account(s.deposit_wallet),
                        owner=w.pubkey(),
                        amount=10_000,
                    )
                )
            ],
        ),
    ),
    "sponsored with a compute-unit price": (
        "sponsored_whitelist_violation",
        "allows a single TransferChecked",
        lambda s, w, fp: (fp, [set_compute_unit_price(1_000_000), pay(w.pubkey(), s.deposit_wallet, 10_000)]),
    ),
}


@pytest.mark.parametrize("case", list(REFUSALS))
async def test_each_refusal_names_its_cause_and_sends_nothing(x402: Settle, wallet: Keypair, case: str) -> None:
    expected_reason, words, make = REFUSALS[case]
    fee_payer, ixs = make(x402, wallet, x402.fee_payer)
    raw = build(fee_payer or wallet.pubkey(), ixs, await x402.blockhash(), [wallet])
    sends = x402.broadcasts

    answer = await x402.settle(body(raw))
    assert answer.status == 400, answer
    assert answer.json["error"]["code"] == "INVALID_REQUEST"
    assert reason(answer) == expected_reason, answer
    assert words in answer.json["error"]["message"], answer
    assert x402.broadcasts == sends


@pytest.mark.parametrize("sponsored", [False, True], ids=["self-paid", "sponsored"])
async def test_a_missing_signature_is_refused(x402: Settle, wallet: Keypair, sponsored: bool) -> None:
    fee_payer = x402.fee_payer if sponsored else wallet.pubkey()
    raw = build(fee_payer, [pay(wallet.pubkey(), x402.deposit_wallet, 10_000)], await x402.blockhash(), [])
    answer = await x402.settle(body(raw))
    assert answer.status == 400 and reason(answer) == "missing_signature", answer
    assert f"missing or invalid signature of {wallet.pubkey()}" in answer.json["error"]["message"]


@pytest.mark.parametrize(
    ("payload", "expected"),
    [
        (b"", "unparseable_body"),
        (b"{", "unparseable_body"),
        (b"[]", "unparseable_body"),
        (b'{"transaction": 5}', "unparseable_body"),
        (b'{"tx": "AAAA"}', "unparseable_body"),
        (b'{"transaction": "not base64!"}', "invalid_base64"),
        (orjson.dumps({"transaction": base64.b64encode(b"hello").decode()}), "invalid_transaction"),
        (orjson.dumps({"transaction": base64.b64encode(bytes(2_000)).decode()}), "invalid_transaction"),
    ],
)
async def test_bad_bodies_are_400_with_the_cause(x402: Settle, payload: bytes, expected: str) -> None:
    answer = await x402.settle(payload)
    assert answer.status == 400 and reason(answer) == expected, answer
    assert answer.json["error"]["message"]


async def test_a_body_over_the_limit_is_413(x402: Settle) -> None:
    answer = await x402.settle(b'{"transaction": "' + b"A" * MAX_BODY_BYTES + b'"}')
    assert answer.status == 413, answer


# ------------------------------------------------------------------------------------ replays, network


async def test_a_replayed_settlement_is_refused_without_a_second_broadcast(x402: Settle, wallet: Keypair) -> None:
    raw = build(x402.fee_payer, [pay(wallet.pubkey(), x402.deposit_wallet, 10_000)], await x402.blockhash(), [wallet])
    sends = x402.broadcasts
    answers = await asyncio.gather(*(x402.settle(body(raw)) for _ in range(3)))  # at once, then once more
    answers.append(await x402.settle(body(raw)))

    assert sorted(a.status for a in answers) == [200, 400, 400, 400], answers
    signature = next(a.json["transaction"] for a in answers if a.status == 200)
    for refused in (a for a in answers if a.status == 400):
        assert reason(refused) == "duplicate_settlement" and signature in refused.json["error"]["message"]
    assert x402.broadcasts == sends + 1
    assert await x402.usdc(wallet.pubkey()) == 1_000_000 - 10_000


async def test_a_network_rejection_is_502_and_may_be_settled_once_it_would_pass(x402: Settle, wallet: Keypair) -> None:
    too_much = 2_000_000  # the wallet holds 1 USDC
    raw = build(x402.fee_payer, [pay(wallet.pubkey(), x402.deposit_wallet, too_much)], await x402.blockhash(), [wallet])
    fee_payer_before = await x402.lamports(x402.fee_payer)

    answer = await x402.settle(body(raw))
    assert answer.status == 502 and answer.json["error"]["code"] == "UPSTREAM_ERROR", answer
    assert reason(answer) == "preflight_rejected"
    assert "insufficient funds" in answer.json["error"]["message"], answer
    assert await x402.lamports(x402.fee_payer) == fee_payer_before  # refused before it was sent: no fee

    await mint_usdc(x402.node, x402.usdc_authority, wallet, wallet.pubkey(), too_much)  # now it would pass
    again = await x402.settle(body(raw))
    assert again.status == 200, again


# ------------------------------------------------------------------------------- configuration, limits


async def test_not_configured_is_503_and_the_address_limit_is_429(
    tmp_path: Path, database_url: str, redis_url: str, devnode_url: str, wallet: Keypair, x402: Settle
) -> None:
    limits = {"x402_settle": {"rps": 0.001, "burst": 2}}
    settings = x402_settings(tmp_path, database_url, redis_url, devnode_url, x402_settle=False, ip_limits=limits)
    raw = build(wallet.pubkey(), [pay(wallet.pubkey(), x402.deposit_wallet, 10_000)], await x402.blockhash(), [wallet])
    async with serve_gateway(settings) as gw, aiohttp.ClientSession() as http:
        answers = [await request(http, "POST", gw.url + SETTLE, body=body(raw)) for _ in range(3)]
    first, second, third = answers
    assert first.status == second.status == 503, answers
    assert first.json["error"]["code"] == "SETTLEMENT_NOT_CONFIGURED" and reason(first) == "settlement_not_configured"
    assert "x402_settle is off" in first.json["error"]["message"]
    assert third.status == 429 and "retry-after" in third.headers, third
    assert capabilities_document(gw.app.profile)["service_profile"]["services"]["x402_settle"] is False
    assert capabilities_document(x402.app.profile)["service_profile"]["services"]["x402_settle"] is True


async def test_a_fee_payer_without_sol_is_503_for_sponsored_payments(
    tmp_path: Path, database_url: str, redis_url: str, devnode: Devnode, wallet: Keypair, x402: Settle
) -> None:
    settings = x402_settings(tmp_path, database_url, redis_url, devnode.rpc_url)
    async with serve_gateway(settings) as gw, aiohttp.ClientSession() as http:
        settle = gw.app.x402_settle
        assert settle.fee_payer is not None and settle.rules is not None
        deposit_wallet = Pubkey.from_string(settle.rules.deposit_wallet)
        raw = build(
            settle.fee_payer.pubkey(), [pay(wallet.pubkey(), deposit_wallet, 10_000)], await x402.blockhash(), [wallet]
        )
        answer = await request(http, "POST", gw.url + SETTLE, body=body(raw))
    assert answer.status == 503 and reason(answer) == "fee_payer_unfunded", answer
    assert "pay the fee yourself" in answer.json["error"]["message"]


async def test_a_wallet_without_sol_pays_through_the_sponsored_path(x402: Settle, devnode_url: str) -> None:
    broke = Keypair()
    funder = Keypair()
    await airdrop(devnode_url, funder.pubkey())
    await mint_usdc(x402.node, x402.usdc_authority, funder, broke.pubkey(), 50_000)
    assert await x402.lamports(broke.pubkey()) == 0
    raw = build(x402.fee_payer, [pay(broke.pubkey(), x402.deposit_wallet, 50_000)], await x402.blockhash(), [broke])
    answer = await x402.settle(body(raw))
    assert answer.status == 200, answer
    confirmed = await confirm_when_final(x402.url, broke, answer.json["transaction"])
    assert confirmed["credited_pubkey"] == str(broke.pubkey()) and confirmed["credits_added"] == 5_000


def _pool(x402: Settle) -> asyncpg.Pool:
    pool = x402.app.conn.db
    assert pool is not None
    return pool


async def test_the_client_library_settles_and_raises_the_documented_refusal(x402: Settle) -> None:
    """``GatewayClient.x402_settle`` (no credentials needed): a refusal is InvalidRequest with its reason
    (the success path runs in examples/x402_pay.py, tests/x402/test_pay_example.py)."""
    async with GatewayClient(x402.url, max_retries=0) as anonymous:
        with pytest.raises(InvalidRequest) as refused:
            await anonymous.x402_settle(b"not a transaction")
    assert refused.value.status == 400 and refused.value.data["reason"] == "invalid_transaction", refused.value

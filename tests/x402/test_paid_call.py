"""The standard x402 flow, with the x402 SDK's own client (``x402==2.25.0``): a call without credentials
gets the 402, the client retries it once with ``PAYMENT-SIGNATURE`` (v2) or ``X-PAYMENT`` (v1), and the
gateway settles the payment, credits the transfer's authority once and serves the call from those
credits with ``PAYMENT-RESPONSE``. Against the real parts: the gateway in this process, PostgreSQL,
Redis and the session devnode executing the SDK's transactions.

The SDK's Solana client needs solana-py's old synchronous client (:mod:`tests.x402.sdk_shim`); its
calls block, so each SDK call runs in a thread (the gateway and the devnode answer on this loop)."""

from __future__ import annotations

import asyncio
import base64
from pathlib import Path
from types import ModuleType
from typing import Any

import orjson
import pytest
import requests
from solana.rpc.async_api import AsyncClient
from solders.hash import Hash
from solders.keypair import Keypair
from solders.pubkey import Pubkey
from x402 import PaymentPayload, PaymentRequired, x402ClientSync
from x402.http.clients.requests import x402_requests
from x402.http.utils import (
    decode_payment_required_header,
    decode_payment_response_header,
    encode_payment_signature_header,
)

from devnode.node import Devnode
from gateway_client import WalletSigner
from tests.auth.helpers import RPC_BODY, Answer, request
from tests.support import TEST_IP_LIMITS
from tests.x402 import sdk_shim
from tests.x402.conftest import settling
from tests.x402.helpers import Settle, build, confirm_when_final, pay

MAINNET = "solana:5eykt4UsFv8P8NJdTREpY1vzqKqZKvdp"
CREDITS = 1_000  # what the 0.01 USDC minimum buys at the default 100,000 credits per USDC


@pytest.fixture
def svm(monkeypatch: pytest.MonkeyPatch) -> ModuleType:
    """The SDK's SVM mechanism, importable once solana-py's old client is shimmed."""
    sdk_shim.install(monkeypatch)
    from x402.mechanisms.svm import exact

    return exact


def sdk_client(svm: ModuleType, wallet: Keypair, rpc_url: str) -> x402ClientSync:
    from x402.mechanisms.svm import KeypairSigner

    client = x402ClientSync()  # the SDK's own example: register the SVM exact scheme
    svm.register_exact_svm_client(client, KeypairSigner(wallet), rpc_url=rpc_url)
    return client


def sdk_call(client: x402ClientSync, url: str) -> requests.Response:
    """getSlot through the SDK's requests session: on a 402 it pays and retries once."""
    with x402_requests(client) as session:
        return session.post(url + "/", data=RPC_BODY, headers={"Content-Type": "application/json"}, timeout=60)


async def terms(x402: Settle) -> PaymentRequired:
    answer = await request(x402.http, "POST", x402.url + "/", body=RPC_BODY)
    assert answer.status == 402, answer
    parsed = decode_payment_required_header(answer.headers["payment-required"])
    assert isinstance(parsed, PaymentRequired)
    return parsed


async def payload(client: x402ClientSync, required: PaymentRequired) -> PaymentPayload:
    made = await asyncio.to_thread(client.create_payment_payload, required)
    assert isinstance(made, PaymentPayload)
    return made


async def paid(x402: Settle, header: str, name: str = "PAYMENT-SIGNATURE") -> Answer:
    headers = {"Content-Type": "application/json", name: header}
    return await request(x402.http, "POST", x402.url + "/", body=RPC_BODY, headers=headers)


async def deposits_of(x402: Settle, wallet: Keypair) -> list[tuple[str, int]]:
    pool = x402.app.conn.db
    assert pool is not None
    rows = await pool.fetch("SELECT signature, credits FROM deposits WHERE pubkey = $1", str(wallet.pubkey()))
    return [(row["signature"], row["credits"]) for row in rows]


def refusal(answer: Answer) -> tuple[str, Any]:
    """The 402's x402 ``error`` (from PAYMENT-REQUIRED, as the SDK reads it) and ``data.reason``."""
    assert answer.status == 402, answer
    required = decode_payment_required_header(answer.headers["payment-required"])
    return str(required.error), answer.json["error"]["data"].get("reason")


async def test_the_sdks_client_pays_in_one_retry_and_the_call_is_served(
    x402: Settle, wallet: Keypair, svm: ModuleType, devnode_url: str
) -> None:
    broadcasts = x402.broadcasts
    client = sdk_client(svm, wallet, devnode_url)
    answer = await asyncio.to_thread(sdk_call, client, x402.url)

    assert answer.status_code == 200, answer.text
    assert isinstance(answer.json()["result"], int) and answer.json()["id"] == 7  # getSlot served
    settled = decode_payment_response_header(answer.headers["PAYMENT-RESPONSE"])  # the SDK's own decoder
    assert settled.success and settled.payer == str(wallet.pubkey()) and settled.network == MAINNET
    assert settled.amount == "10000"
    assert x402.broadcasts == broadcasts + 1
    assert await deposits_of(x402, wallet) == [(settled.transaction, CREDITS)]
    assert 0 < int(answer.headers["X-Credits-Remaining"]) < CREDITS  # billed from the credits just bought

    confirmed = await confirm_when_final(x402.url, wallet, settled.transaction)  # the same deposit record
    assert confirmed["credits_added"] == 0 and confirmed["already_processed"] is True
    assert await deposits_of(x402, wallet) == [(settled.transaction, CREDITS)]


async def test_a_replayed_header_credits_nothing_more(
    x402: Settle, wallet: Keypair, svm: ModuleType, devnode_url: str
) -> None:
    made = await payload(sdk_client(svm, wallet, devnode_url), await terms(x402))
    header = encode_payment_signature_header(made)
    first = await paid(x402, header)
    assert first.status == 200, first
    broadcasts = x402.broadcasts

    again = await paid(x402, header)
    error, reason = refusal(again)
    assert reason == "duplicate_settlement" and "duplicate_settlement" in error
    assert x402.broadcasts == broadcasts
    assert [credits for _, credits in await deposits_of(x402, wallet)] == [CREDITS]


async def test_two_concurrent_retries_with_one_payment_credit_once(
    x402: Settle, wallet: Keypair, svm: ModuleType, devnode_url: str
) -> None:
    made = await payload(sdk_client(svm, wallet, devnode_url), await terms(x402))
    header = encode_payment_signature_header(made)
    broadcasts = x402.broadcasts
    answers = await asyncio.gather(paid(x402, header), paid(x402, header))

    assert sorted(a.status for a in answers) == [200, 402], answers
    assert refusal(next(a for a in answers if a.status == 402))[1] == "duplicate_settlement"
    assert x402.broadcasts == broadcasts + 1
    assert [credits for _, credits in await deposits_of(x402, wallet)] == [CREDITS]


async def test_a_v1_x_payment_header_pays_too(x402: Settle, wallet: Keypair, svm: ModuleType, devnode_url: str) -> None:
    made = await payload(sdk_client(svm, wallet, devnode_url), await terms(x402))
    v1 = {"x402Version": 1, "scheme": "exact", "network": "solana", "payload": made.payload}
    answer = await paid(x402, base64.b64encode(orjson.dumps(v1)).decode(), "X-PAYMENT")
    assert answer.status == 200, answer
    settled = decode_payment_response_header(answer.headers["x-payment-response"])
    assert settled.success and settled.payer == str(wallet.pubkey())


async def test_too_little_gets_the_402_with_the_reason(
    x402: Settle, wallet: Keypair, svm: ModuleType, devnode_url: str
) -> None:
    required = await terms(x402)
    required.accepts[0].amount = "5000"  # the SDK pays what it is told: half the minimum
    made = await payload(sdk_client(svm, wallet, devnode_url), required)
    broadcasts = x402.broadcasts

    error, reason = refusal(await paid(x402, encode_payment_signature_header(made)))
    assert reason == "amount_below_minimum" and "amount_below_minimum" in error and "5000" in error
    assert x402.broadcasts == broadcasts and await deposits_of(x402, wallet) == []


async def test_a_payment_in_another_mint_gets_the_402_with_the_reason(
    x402: Settle, wallet: Keypair, svm: ModuleType, devnode_url: str
) -> None:
    required = await terms(x402)
    other = Keypair().pubkey()
    tx = build(
        x402.fee_payer, [pay(wallet.pubkey(), x402.deposit_wallet, 10_000, mint=other)], Hash.default(), [wallet]
    )
    accepted = required.accepts[0].model_dump(by_alias=True, exclude_none=True)
    document = {"x402Version": 2, "accepted": accepted, "payload": {"transaction": base64.b64encode(tx).decode()}}
    broadcasts = x402.broadcasts

    error, reason = refusal(await paid(x402, base64.b64encode(orjson.dumps(document)).decode()))
    assert reason == "wrong_mint" and str(other) in error
    assert x402.broadcasts == broadcasts and await deposits_of(x402, wallet) == []


@pytest.mark.parametrize(
    ("header", "reason"),
    [
        ("not base64!", "invalid_payment_header"),
        (base64.b64encode(b'{"x402Version": 3}').decode(), "invalid_payment_header"),
        ("A" * 20_000, "invalid_payment_header"),  # refused by its length, undecoded
    ],
)
async def test_a_malformed_header_gets_the_402_with_the_reason(x402: Settle, header: str, reason: str) -> None:
    error, found = refusal(await paid(x402, header))
    assert found == reason and reason in error


async def test_credentials_decide_alone_the_header_is_then_ignored(x402: Settle, wallet: Keypair) -> None:
    """A wallet-signed call with a (bad) payment header is the wallet's call: no payment is attempted."""
    signed = WalletSigner(bytes(wallet)).headers("POST", "/", RPC_BODY)
    answer = await request(
        x402.http, "POST", x402.url + "/", body=RPC_BODY, headers={**signed, "PAYMENT-SIGNATURE": "not base64!"}
    )
    assert answer.status == 402 and "reason" not in answer.json["error"]["data"], answer  # no account, no payment


async def test_payment_headers_share_the_settle_routes_per_address_limit(
    tmp_path: Path, database_url: str, redis_url: str, devnode: Devnode, node: AsyncClient
) -> None:
    limits = {**TEST_IP_LIMITS, "x402_settle": {"rps": 0.001, "burst": 1}}
    async with settling(tmp_path, database_url, redis_url, devnode, node, ip_limits=limits) as limited:
        first, second = await paid(limited, "not base64!"), await paid(limited, "not base64!")
    assert refusal(first)[1] == "invalid_payment_header"
    assert second.status == 429 and "retry-after" in second.headers, second  # refused before it is decoded


def test_the_fee_payer_is_published_with_the_sponsored_caps() -> None:
    from gateway.auth.payment_terms import PaymentTerms

    extra = PaymentTerms(str(Pubkey.default()), str(Pubkey.default()), "mint", "solana-mainnet").extra()
    assert extra["sponsored"]["maxComputeUnits"] == 200_000
    assert extra["sponsored"]["maxComputeUnitPriceMicroLamports"] == 10_000

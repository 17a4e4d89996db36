"""The official x402 SDK (``x402==2.25.0``) against the gateway: its parser reads the 402's
``PAYMENT-REQUIRED`` header, and the payment its Solana client builds from those terms (the sponsored
shape: compute-unit limit and price, TransferChecked, memo) pays in the paid call's
``PAYMENT-SIGNATURE`` header, while ``POST /x402/settle`` keeps the interface's single TransferChecked
(docs/api.md). The SDK's own client paying in one retry: test_paid_call.py.

Its Solana client needs solana-py's synchronous client, which solana 0.41 no longer has: the tests give
it one (:mod:`tests.x402.sdk_shim`)."""

from __future__ import annotations

import asyncio
import base64
from pathlib import Path
from types import ModuleType

import orjson
import pytest
from solana.rpc.async_api import AsyncClient
from solders.keypair import Keypair
from solders.pubkey import Pubkey
from solders.transaction import VersionedTransaction
from x402 import NoMatchingRequirementsError, PaymentRequired, x402ClientSync
from x402.http.utils import (
    decode_payment_required_header,
    decode_payment_response_header,
    encode_payment_signature_header,
)

from devnode.node import Devnode
from gateway.x402.rules import MEMO_PROGRAM
from tests.auth.helpers import RPC_BODY, Answer, request
from tests.chain import USDC_MINT
from tests.x402 import sdk_shim
from tests.x402.conftest import settling
from tests.x402.helpers import Settle, confirm_when_final

MAINNET = "solana:5eykt4UsFv8P8NJdTREpY1vzqKqZKvdp"
DEVNET = "solana:EtWTRABZaYq6iMfeYKouRu166VU2xqa1"
COMPUTE_BUDGET = Pubkey.from_string("ComputeBudget111111111111111111111111111111")


async def payment_required(x402: Settle) -> tuple[Answer, PaymentRequired]:
    """A call without credentials, and its 402's header as the SDK parses it."""
    answer = await request(x402.http, "POST", x402.url + "/", body=RPC_BODY)
    assert answer.status == 402, answer
    parsed = decode_payment_required_header(answer.headers["payment-required"])
    assert isinstance(parsed, PaymentRequired)
    return answer, parsed


async def test_the_402_terms_parse_with_the_sdks_own_parser(x402: Settle) -> None:
    answer, required = await payment_required(x402)
    assert required.x402_version == 2 and required.error
    assert required.resource is not None and required.resource.url.endswith("/")
    [accept] = required.accepts
    assert (accept.scheme, accept.network, accept.amount, accept.asset) == ("exact", MAINNET, "10000", str(USDC_MINT))
    assert accept.pay_to == str(x402.deposit_wallet) and accept.max_timeout_seconds == 60
    assert accept.extra["feePayer"] == str(x402.fee_payer)
    assert accept.extra["sponsored"]["maxComputeUnits"] == 200_000  # the header path's compute-budget caps
    assert answer.json["accepts"][0] == accept.model_dump(by_alias=True, exclude_none=True)
    instructions = answer.json["error"]["data"]["instructions"]
    assert "/x402/settle" in instructions and "PAYMENT-SIGNATURE" in instructions  # how an x402 client pays


async def paid_call(x402: Settle, header: str) -> Answer:
    """The call again, paid in the PAYMENT-SIGNATURE header."""
    headers = {"Content-Type": "application/json", "PAYMENT-SIGNATURE": header}
    return await request(x402.http, "POST", x402.url + "/", body=RPC_BODY, headers=headers)


@pytest.fixture
def svm(monkeypatch: pytest.MonkeyPatch) -> ModuleType:
    """The SDK's SVM mechanism, importable once solana-py's old client is shimmed."""
    sdk_shim.install(monkeypatch)
    from x402.mechanisms.svm import exact

    return exact


async def test_the_sdks_payment_pays_in_the_header_and_x402_settle_refuses_its_shape(
    x402: Settle, wallet: Keypair, svm: ModuleType, devnode_url: str
) -> None:
    from x402.mechanisms.svm import KeypairSigner

    _, required = await payment_required(x402)
    client = x402ClientSync()  # the SDK's own example: register the SVM scheme, pay the 402's terms
    svm.register_exact_svm_client(client, KeypairSigner(wallet), rpc_url=devnode_url)
    payload = await asyncio.to_thread(client.create_payment_payload, required)  # it blocks on the node
    transaction = payload.payload["transaction"]

    tx = VersionedTransaction.from_bytes(base64.b64decode(transaction))
    keys = tx.message.account_keys
    assert keys[0] == x402.fee_payer  # sponsored: the service pays the fee
    programs = [keys[ix.program_id_index] for ix in tx.message.instructions]
    assert programs[:2] == [COMPUTE_BUDGET, COMPUTE_BUDGET] and programs[3] == MEMO_PROGRAM

    refused = await x402.settle(orjson.dumps({"transaction": transaction}))  # the interface's sponsored rule
    assert refused.status == 400 and refused.json["error"]["data"]["reason"] == "sponsored_whitelist_violation"

    answer = await paid_call(x402, encode_payment_signature_header(payload))
    assert answer.status == 200, answer
    settled = decode_payment_response_header(answer.headers["payment-response"])
    assert settled.success and settled.network == MAINNET and settled.payer == str(wallet.pubkey())
    confirmed = await confirm_when_final(x402.url, wallet, settled.transaction)  # credited already, once
    assert confirmed["credited_pubkey"] == str(wallet.pubkey()) and confirmed["already_processed"] is True


async def test_on_the_devnode_the_sdk_needs_the_test_usdc_allowed(
    tmp_path: Path,
    database_url: str,
    redis_url: str,
    devnode: Devnode,
    node: AsyncClient,
    wallet: Keypair,
    svm: ModuleType,
) -> None:
    """The devnode's terms name Solana devnet with test USDC at the mainnet mint's address: the SDK's
    default spend controls refuse that asset before anything is sent (its own message says how to allow
    it), and with it allowed the payment settles."""
    from x402.mechanisms.svm import KeypairSigner

    async with settling(tmp_path, database_url, redis_url, devnode, node, network="devnode") as devnet:
        _, required = await payment_required(devnet)
        assert required.accepts[0].network == DEVNET
        client = x402ClientSync()
        svm.register_exact_svm_client(client, KeypairSigner(wallet), rpc_url=devnode.rpc_url)
        with pytest.raises(NoMatchingRequirementsError, match="allowed_assets"):
            await asyncio.to_thread(client.create_payment_payload, required)

        client.set_spend_controls({"allowed_assets": [{"network": DEVNET, "asset": str(USDC_MINT)}]})
        payload = await asyncio.to_thread(client.create_payment_payload, required)
        answer = await paid_call(devnet, encode_payment_signature_header(payload))
    assert answer.status == 200, answer
    assert decode_payment_response_header(answer.headers["payment-response"]).network == DEVNET

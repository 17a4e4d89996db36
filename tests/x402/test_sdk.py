"""The official x402 SDK (``x402==2.25.0``) against the gateway: its parser reads the 402's
``PAYMENT-REQUIRED`` header, and the payment its Solana client builds from those terms (the sponsored
shape: compute-unit limit and price, TransferChecked, memo) is settled and credited.

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
from x402.http.utils import decode_payment_required_header

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
    assert accept.extra == {"feePayer": str(x402.fee_payer)}
    assert answer.json["accepts"][0] == accept.model_dump(by_alias=True, exclude_none=True)
    assert "/x402/settle" in answer.json["error"]["data"]["instructions"]  # where an x402 client settles


@pytest.fixture
def svm(monkeypatch: pytest.MonkeyPatch) -> ModuleType:
    """The SDK's SVM mechanism, importable once solana-py's old client is shimmed."""
    sdk_shim.install(monkeypatch)
    from x402.mechanisms.svm import exact

    return exact


async def test_the_sdks_payment_from_the_402_terms_is_settled_and_credited(
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

    answer = await x402.settle(orjson.dumps({"transaction": transaction}))
    assert answer.status == 200, answer
    assert answer.json["success"] is True and answer.json["network"] == MAINNET
    confirmed = await confirm_when_final(x402.url, wallet, answer.json["transaction"])
    assert confirmed["credited_pubkey"] == str(wallet.pubkey()) and confirmed["credits_added"] == 1_000


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
        answer = await devnet.settle(orjson.dumps({"transaction": payload.payload["transaction"]}))
    assert answer.status == 200 and answer.json["network"] == DEVNET, answer

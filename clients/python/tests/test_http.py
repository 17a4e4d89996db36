"""GatewayClient against a running gateway: a first call, the typed errors, both secret lengths, sends that
reconcile, x402's refusal, the account's records."""

from __future__ import annotations

import base64

import pytest
from solders.hash import Hash
from solders.keypair import Keypair
from solders.message import Message
from solders.system_program import TransferParams, transfer
from solders.transaction import Transaction

from gateway_client import (
    AuthFailed,
    GatewayClient,
    InvalidRequest,
    PaymentRequired,
    WalletSigner,
    gateway_error,
    solana_client,
)
from gateway_client.account import pricing, read_ledger


async def test_a_first_call_with_an_api_key(url: str, api_key: str) -> None:
    async with GatewayClient(url, api_key=api_key) as gw:
        slot = await gw.rpc("getSlot")
        assert isinstance(slot, int) and slot > 0
        assert gw.meter.credits_remaining is not None and gw.meter.credits_remaining > 0
        assert gw.meter.request_id


async def test_each_refusal_is_its_typed_error(url: str, api_key: str) -> None:
    async with GatewayClient(url, api_key="srpc_live_" + "A" * 43, max_retries=0) as gw:
        with pytest.raises(AuthFailed) as refused:
            await gw.rpc("getSlot")
        assert refused.value.status == 401 and refused.value.code == "AUTH_FAILED"
    async with GatewayClient(url, max_retries=0) as anonymous:
        with pytest.raises(PaymentRequired) as unpaid:  # no credentials: the deposit terms
            await anonymous.rpc("getSlot")
        assert unpaid.value.status == 402 and unpaid.value.terms.get("deposit_address")
    async with GatewayClient(url, api_key=api_key, max_retries=0) as gw:
        with pytest.raises(InvalidRequest) as malformed:  # admitted, then refused as no JSON: free
            await gw.request("POST", "/", b"{not json")
        assert malformed.value.status == 400


@pytest.mark.parametrize("length", [32, 64])
async def test_a_wallet_signs_with_a_seed_or_a_keypair(url: str, secret: bytes, length: int) -> None:
    signer = WalletSigner(secret[:length])
    assert signer.pubkey == WalletSigner(secret).pubkey
    async with GatewayClient(url, signer=signer) as gw:
        assert isinstance(await gw.rpc("getSlot"), int)  # signed, a fresh nonce each
        assert (await gw.account_info())["pubkey"] == signer.pubkey


def test_a_keypair_whose_halves_disagree_is_refused(secret: bytes) -> None:
    with pytest.raises(ValueError, match="does not match"):
        WalletSigner(secret[:32] + bytes(32))


async def test_send_and_confirm_then_its_status(url: str, api_key: str, secret: bytes) -> None:
    payer = Keypair.from_bytes(secret)
    async with GatewayClient(url, api_key=api_key) as gw:
        blockhash = Hash.from_string((await gw.rpc("getLatestBlockhash"))["value"]["blockhash"])
        to = Keypair().pubkey()
        move = transfer(TransferParams(from_pubkey=payer.pubkey(), to_pubkey=to, lamports=1_000_000))
        tx = Transaction([payer], Message([move], payer.pubkey()), blockhash)
        result = await gw.send_and_confirm(bytes(tx))
        assert result["status"] == "confirmed", result
        status = await gw.send_status(str(tx.signatures[0]))
        assert status is not None and status["status"] == "confirmed", status
        balance = await gw.rpc("getBalance", [str(to), {"commitment": "confirmed"}])
        assert balance["value"] == 1_000_000


async def test_x402_settle_refuses_what_is_no_payment(url: str) -> None:
    async with GatewayClient(url) as gw:
        with pytest.raises(InvalidRequest) as refused:
            await gw.x402_settle(base64.b64encode(b"not a transaction").decode())
        assert refused.value.status == 400


async def test_the_account_reads(url: str, api_key: str) -> None:
    async with GatewayClient(url, api_key=api_key) as gw:
        ledger = await read_ledger(gw)
        assert any(entry["type"] == "deposit" for entry in ledger), ledger[:5]
        assert "classes" in await pricing(gw)
        recent = await gw.recent_signals(limit=5)
        assert isinstance(recent["events"], list) and "next_since_slot" in recent


async def test_solana_py_through_the_gateway(url: str, api_key: str) -> None:
    async with solana_client(url, api_key=api_key) as client:
        assert (await client.get_slot()).value > 0
    async with solana_client(url, api_key="srpc_live_" + "B" * 43) as refused:
        with pytest.raises(Exception) as raised:
            await refused.get_slot()
        error = gateway_error(raised.value)
        assert isinstance(error, AuthFailed), raised.value

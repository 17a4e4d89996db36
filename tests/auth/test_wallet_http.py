"""Per-request wallet signatures over real HTTP: success, every documented failure, replay, 402 terms."""

from __future__ import annotations

import base64
import os
import time
from collections.abc import Callable
from pathlib import Path

import aiohttp
import asyncpg
import base58
import orjson
import pytest

from gateway.base.keys import DEPOSIT_WALLET, FEE_PAYER, load_keypair
from gateway_client import WalletSigner
from tests.auth.helpers import RPC_BODY, create_account, request, signed
from tests.support import RunningGateway


async def test_signed_call_reaches_the_node(
    gateway: RunningGateway, http: aiohttp.ClientSession, funded: WalletSigner
) -> None:
    answer = await signed(http, funded, "POST", gateway.url, "/", RPC_BODY)
    assert answer.status == 200, answer
    assert isinstance(answer.json, dict) and answer.json["id"] == 7
    assert isinstance(answer.json["result"], int) and answer.json["result"] > 0  # the devnode's current slot
    assert "x-request-id" in answer.headers


async def test_a_64_byte_keypair_file_signs_too(
    gateway: RunningGateway, http: aiohttp.ClientSession, db: asyncpg.Connection
) -> None:
    from solders.keypair import Keypair

    keypair = Keypair()
    signer = WalletSigner(bytes(keypair))
    assert signer.pubkey == str(keypair.pubkey())
    await create_account(db, signer.pubkey)
    assert (await signed(http, signer, "POST", gateway.url, "/rpc", RPC_BODY)).status == 200


async def test_query_string_is_not_signed(
    gateway: RunningGateway, http: aiohttp.ClientSession, funded: WalletSigner
) -> None:
    headers = funded.headers("POST", "/", RPC_BODY)
    answer = await request(http, "POST", gateway.url + "/?cluster=x", body=RPC_BODY, headers=headers)
    assert answer.status == 200, answer


async def test_no_credentials_is_402_with_x402_terms(
    gateway: RunningGateway, http: aiohttp.ClientSession, auth_home: Path
) -> None:
    answer = await request(http, "POST", gateway.url + "/", body=RPC_BODY)
    deposit = str(load_keypair(auth_home / DEPOSIT_WALLET).pubkey())
    fee_payer = str(load_keypair(auth_home / FEE_PAYER).pubkey())
    usdc = gateway.app.settings.usdc_mint

    assert answer.status == 402, answer
    body = answer.json
    assert body["jsonrpc"] == "2.0" and body["id"] == 7
    assert body["error"]["code"] == -32002
    data = body["error"]["data"]
    assert data["deposit_address"] == deposit
    assert data["usdc_mint"] == usdc
    assert data["minimum_deposit_usdc"] == "0.01"
    assert data["network"] == gateway.app.settings.shown_network == "solana-mainnet"
    assert isinstance(data["instructions"], str) and deposit in data["instructions"]
    extra = {"feePayer": fee_payer, "sponsored": data["extra"]["sponsored"]}  # the header path's caps: tests/x402
    assert data["payTo"] == deposit and data["extra"] == extra and extra["sponsored"]["maxComputeUnits"] == 200_000

    expected_accept = {
        "scheme": "exact",
        "network": "solana:5eykt4UsFv8P8NJdTREpY1vzqKqZKvdp",
        "amount": "10000",
        "asset": usdc,
        "payTo": deposit,
        "maxTimeoutSeconds": 60,
        "extra": extra,
    }
    assert body["x402Version"] == 2
    assert body["accepts"] == [expected_accept]
    assert body["resource"]["url"].endswith("/")

    header = orjson.loads(base64.b64decode(answer.headers["payment-required"]))
    assert header["x402Version"] == 2
    assert header["accepts"] == [expected_accept]
    assert isinstance(header["error"], str) and header["error"]
    assert header["resource"] == body["resource"]


async def test_valid_signature_without_account_is_402(
    gateway: RunningGateway, http: aiohttp.ClientSession, signer: WalletSigner
) -> None:
    answer = await signed(http, signer, "POST", gateway.url, "/", RPC_BODY)
    assert answer.status == 402, answer
    assert answer.code == -32002
    assert signer.pubkey in answer.json["error"]["data"]["instructions"]
    assert "payment-required" in answer.headers


def _b58(n: int) -> str:
    return base58.b58encode(os.urandom(n)).decode()


def _tamper(headers: dict[str, str], **changes: str | None) -> dict[str, str]:
    out = dict(headers)
    for name, value in changes.items():
        key = {"pubkey": "X-Pubkey", "signature": "X-Signature", "timestamp": "X-Timestamp", "nonce": "X-Nonce"}[name]
        if value is None:
            out.pop(key)
        else:
            out[key] = value
    return out


BAD_HEADERS: dict[str, Callable[[dict[str, str]], dict[str, str]]] = {
    "only X-Pubkey": lambda h: {"X-Pubkey": h["X-Pubkey"]},
    "missing X-Nonce": lambda h: _tamper(h, nonce=None),
    "missing X-Signature": lambda h: _tamper(h, signature=None),
    "pubkey not base58": lambda h: _tamper(h, pubkey="0OIl" * 8),
    "pubkey 31 bytes": lambda h: _tamper(h, pubkey=_b58(31)),
    "pubkey 33 bytes": lambda h: _tamper(h, pubkey=_b58(33)),
    "pubkey empty": lambda h: _tamper(h, pubkey=""),
    "signature not base58": lambda h: _tamper(h, signature="+" * 80),
    "signature 63 bytes": lambda h: _tamper(h, signature=_b58(63)),
    "signature 65 bytes": lambda h: _tamper(h, signature=_b58(65)),
    "signature of something else": lambda h: _tamper(h, signature=_b58(64)),
    "timestamp not an integer": lambda h: _tamper(h, timestamp="12.5"),
    "timestamp negative": lambda h: _tamper(h, timestamp="-5"),
    "nonce with a slash": lambda h: _tamper(h, nonce="a/b"),
    "nonce empty": lambda h: _tamper(h, nonce=""),
}


@pytest.mark.parametrize("case", sorted(BAD_HEADERS))
async def test_malformed_wallet_headers_are_401(
    gateway: RunningGateway, http: aiohttp.ClientSession, funded: WalletSigner, case: str
) -> None:
    headers = BAD_HEADERS[case](funded.headers("POST", "/", RPC_BODY))
    answer = await request(http, "POST", gateway.url + "/", body=RPC_BODY, headers=headers)
    assert answer.status == 401, answer
    assert answer.json["error"]["code"] == "AUTH_FAILED"
    assert answer.json["error"]["message"]
    assert answer.json["error"]["requestId"] == answer.headers["x-request-id"]


@pytest.mark.parametrize("nonce", ["n" * 129, "naïve", "a b", "semi;colon"])
async def test_oversized_or_invalid_nonce_is_401(
    gateway: RunningGateway, http: aiohttp.ClientSession, funded: WalletSigner, nonce: str
) -> None:
    headers = funded.headers("POST", "/", RPC_BODY, nonce=nonce)
    answer = await request(http, "POST", gateway.url + "/", body=RPC_BODY, headers=headers)
    assert (answer.status, answer.code) == (401, "AUTH_FAILED"), answer


async def test_longest_nonce_and_all_allowed_characters_pass(
    gateway: RunningGateway, http: aiohttp.ClientSession, funded: WalletSigner
) -> None:
    for nonce in ["x" * 128, "Az09-_:.," + os.urandom(4).hex()]:
        answer = await signed(http, funded, "POST", gateway.url, "/", RPC_BODY, nonce=nonce)
        assert answer.status == 200, (nonce, answer)


@pytest.mark.parametrize("skew", [-61, 61, -3600])
async def test_timestamp_outside_window_is_401(
    gateway: RunningGateway, http: aiohttp.ClientSession, funded: WalletSigner, skew: int
) -> None:
    answer = await signed(http, funded, "POST", gateway.url, "/", RPC_BODY, timestamp=int(time.time()) + skew)
    assert (answer.status, answer.code) == (401, "AUTH_FAILED"), answer


async def test_timestamp_inside_window_passes(
    gateway: RunningGateway, http: aiohttp.ClientSession, funded: WalletSigner
) -> None:
    for skew in (-50, 50):
        answer = await signed(http, funded, "POST", gateway.url, "/", RPC_BODY, timestamp=int(time.time()) + skew)
        assert answer.status == 200, answer


async def test_signature_over_another_body_is_401(
    gateway: RunningGateway, http: aiohttp.ClientSession, funded: WalletSigner
) -> None:
    headers = funded.headers("POST", "/", b'{"jsonrpc":"2.0","id":7,"method":"getBalance"}')
    answer = await request(http, "POST", gateway.url + "/", body=RPC_BODY, headers=headers)
    assert (answer.status, answer.code) == (401, "AUTH_FAILED"), answer


async def test_signature_for_another_path_is_401(
    gateway: RunningGateway, http: aiohttp.ClientSession, funded: WalletSigner
) -> None:
    headers = funded.headers("POST", "/rpc", RPC_BODY)
    answer = await request(http, "POST", gateway.url + "/", body=RPC_BODY, headers=headers)
    assert (answer.status, answer.code) == (401, "AUTH_FAILED"), answer


async def test_replayed_nonce_is_403(
    gateway: RunningGateway, http: aiohttp.ClientSession, funded: WalletSigner
) -> None:
    headers = funded.headers("POST", "/", RPC_BODY)
    first = await request(http, "POST", gateway.url + "/", body=RPC_BODY, headers=headers)
    again = await request(http, "POST", gateway.url + "/", body=RPC_BODY, headers=headers)
    assert first.status == 200, first
    assert (again.status, again.code) == (403, "NONCE_REUSED"), again


async def test_same_nonce_freshly_signed_is_still_refused(
    gateway: RunningGateway, http: aiohttp.ClientSession, funded: WalletSigner
) -> None:
    assert (await signed(http, funded, "POST", gateway.url, "/", RPC_BODY, nonce="once")).status == 200
    other_body = b'{"jsonrpc":"2.0","id":8,"method":"getSlot"}'
    answer = await signed(http, funded, "POST", gateway.url, "/", other_body, nonce="once")
    assert (answer.status, answer.code) == (403, "NONCE_REUSED")


async def test_failed_requests_do_not_burn_the_nonce(
    gateway: RunningGateway, http: aiohttp.ClientSession, funded: WalletSigner
) -> None:
    nonce = "keep-" + os.urandom(6).hex()
    forged = _tamper(funded.headers("POST", "/", RPC_BODY, nonce=nonce), signature=_b58(64))
    assert (await request(http, "POST", gateway.url + "/", body=RPC_BODY, headers=forged)).status == 401
    stale = await signed(http, funded, "POST", gateway.url, "/", RPC_BODY, nonce=nonce, timestamp=int(time.time()) - 90)
    assert stale.status == 401
    answer = await signed(http, funded, "POST", gateway.url, "/", RPC_BODY, nonce=nonce)
    assert answer.status == 200, answer


async def test_nonces_are_per_public_key(
    gateway: RunningGateway, http: aiohttp.ClientSession, db: asyncpg.Connection
) -> None:
    one, two = WalletSigner(os.urandom(32)), WalletSigner(os.urandom(32))
    for s in (one, two):
        await create_account(db, s.pubkey)
        assert (await signed(http, s, "POST", gateway.url, "/", RPC_BODY, nonce="shared")).status == 200


async def test_non_utf8_body_is_signed_as_raw_bytes(
    gateway: RunningGateway, http: aiohttp.ClientSession, funded: WalletSigner
) -> None:
    body = b"\xff\xfe\x00garbage\x80"
    answer = await signed(http, funded, "POST", gateway.url, "/", body)
    assert answer.status == 400, answer  # authenticated, then refused as JSON: never a 500
    assert answer.code == "INVALID_REQUEST"  # -32700 in its rpcCode (docs/api.md, Errors)
    forged = _tamper(funded.headers("POST", "/", body), signature=_b58(64))
    assert (await request(http, "POST", gateway.url + "/", body=body, headers=forged)).status == 401


async def test_wallet_headers_outrank_bearer(
    gateway: RunningGateway, http: aiohttp.ClientSession, funded: WalletSigner
) -> None:
    from tests.auth.helpers import open_session

    token = await open_session(http, funded, gateway.url)
    headers = {"X-Pubkey": funded.pubkey, "Authorization": f"Bearer {token}"}
    answer = await request(http, "POST", gateway.url + "/", body=RPC_BODY, headers=headers)
    assert (answer.status, answer.code) == (401, "AUTH_FAILED"), answer

"""Session challenges and bearer tokens over real HTTP, including expiry with a tiny-TTL store."""

from __future__ import annotations

import asyncio
import os
import re
from collections.abc import AsyncIterator

import aiohttp
import asyncpg
import orjson
import pytest
import redis.asyncio as aioredis

from gateway.app.settings import Settings
from gateway_client import WalletSigner
from tests.auth.helpers import RPC_BODY, create_account, create_api_key, deposit_credited, open_session, request
from tests.support import RunningGateway, serve_gateway

HEX64 = re.compile(r"[0-9a-f]{64}")


async def _challenge(http: aiohttp.ClientSession, base: str, pubkey: str) -> str:
    answer = await request(http, "POST", base + "/auth/challenge", body=orjson.dumps({"pubkey": pubkey}))
    assert answer.status == 200, answer
    return str(answer.json["challenge"])


async def _verify(http: aiohttp.ClientSession, base: str, document: dict[str, str]) -> tuple[int, object]:
    answer = await request(http, "POST", base + "/auth/verify", body=orjson.dumps(document))
    return answer.status, answer.code if answer.status != 200 else answer.json


async def test_challenge_verify_and_bearer(
    gateway: RunningGateway, http: aiohttp.ClientSession, signer: WalletSigner, db: asyncpg.Connection
) -> None:
    answer = await request(http, "POST", gateway.url + "/auth/challenge", body=orjson.dumps({"pubkey": signer.pubkey}))
    assert answer.status == 200
    assert HEX64.fullmatch(answer.json["challenge"]) and answer.json["expires_in"] == 300
    challenge = answer.json["challenge"]
    status, body = await _verify(
        http,
        gateway.url,
        {"pubkey": signer.pubkey, "challenge": challenge, "signature": signer.sign_challenge(challenge)},
    )
    assert status == 200 and isinstance(body, dict)
    assert HEX64.fullmatch(body["token"]) and body["expires_in"] == 3600
    bearer = {"Authorization": f"Bearer {body['token']}"}

    no_account = await request(http, "POST", gateway.url + "/", body=RPC_BODY, headers=bearer)
    assert (no_account.status, no_account.code) == (402, -32002), no_account
    await create_account(db, signer.pubkey)
    await deposit_credited(gateway, signer.pubkey)  # the 402's "no account" is remembered until told
    ok = await request(http, "POST", gateway.url + "/", body=RPC_BODY, headers=bearer)
    assert ok.status == 200, ok


async def test_token_is_stored_hashed(
    gateway: RunningGateway, http: aiohttp.ClientSession, signer: WalletSigner, redis_client: aioredis.Redis
) -> None:
    token = await open_session(http, signer, gateway.url)
    assert await redis_client.exists(f"session:{token}") == 0
    keys = [k async for k in redis_client.scan_iter(match="session:*")]
    assert all(token.encode() not in k for k in keys)


async def test_challenge_is_single_use(
    gateway: RunningGateway, http: aiohttp.ClientSession, signer: WalletSigner
) -> None:
    challenge = await _challenge(http, gateway.url, signer.pubkey)
    document = {"pubkey": signer.pubkey, "challenge": challenge, "signature": signer.sign_challenge(challenge)}
    assert (await _verify(http, gateway.url, document))[0] == 200
    assert await _verify(http, gateway.url, document) == (401, "AUTH_FAILED")


async def test_bad_signature_does_not_consume_the_challenge(
    gateway: RunningGateway, http: aiohttp.ClientSession, signer: WalletSigner
) -> None:
    challenge = await _challenge(http, gateway.url, signer.pubkey)
    other = WalletSigner(os.urandom(32))
    forged = {"pubkey": signer.pubkey, "challenge": challenge, "signature": other.sign_challenge(challenge)}
    assert await _verify(http, gateway.url, forged) == (401, "AUTH_FAILED")
    hex_decoded = signer.sign(bytes.fromhex(challenge))  # signing the decoded bytes is the classic mistake
    assert await _verify(http, gateway.url, {**forged, "signature": hex_decoded}) == (401, "AUTH_FAILED")
    garbage = {**forged, "signature": "0OIl"}
    assert await _verify(http, gateway.url, garbage) == (401, "AUTH_FAILED")
    good = {**forged, "signature": signer.sign_challenge(challenge)}
    assert (await _verify(http, gateway.url, good))[0] == 200


async def test_challenge_is_bound_to_its_public_key(
    gateway: RunningGateway, http: aiohttp.ClientSession, signer: WalletSigner
) -> None:
    challenge = await _challenge(http, gateway.url, signer.pubkey)
    other = WalletSigner(os.urandom(32))
    document = {"pubkey": other.pubkey, "challenge": challenge, "signature": other.sign_challenge(challenge)}
    assert await _verify(http, gateway.url, document) == (401, "AUTH_FAILED")


async def test_unissued_challenge_is_401(
    gateway: RunningGateway, http: aiohttp.ClientSession, signer: WalletSigner
) -> None:
    challenge = os.urandom(32).hex()
    document = {"pubkey": signer.pubkey, "challenge": challenge, "signature": signer.sign_challenge(challenge)}
    assert await _verify(http, gateway.url, document) == (401, "AUTH_FAILED")


@pytest.mark.parametrize(
    ("path", "body"),
    [
        ("/auth/challenge", b"not json"),
        ("/auth/challenge", b"\xff\xfe"),
        ("/auth/challenge", b"[]"),
        ("/auth/challenge", b"{}"),
        ("/auth/challenge", b'{"pubkey": 5}'),
        ("/auth/challenge", b'{"pubkey": "0OIl"}'),
        ("/auth/challenge", b'{"pubkey": "1111"}'),
        ("/auth/verify", b"{}"),
        ("/auth/verify", b'{"pubkey": "11111111111111111111111111111111", "signature": "x"}'),
        ("/auth/verify", b'{"pubkey": "11111111111111111111111111111111", "challenge": "ABC", "signature": "x"}'),
        ("/auth/verify", b'{"pubkey": "11111111111111111111111111111111", "challenge": 7, "signature": "x"}'),
    ],
)
async def test_bad_bodies_are_400(gateway: RunningGateway, http: aiohttp.ClientSession, path: str, body: bytes) -> None:
    answer = await request(http, "POST", gateway.url + path, body=body)
    assert (answer.status, answer.code) == (400, "INVALID_REQUEST"), answer


async def test_logout_revokes(
    gateway: RunningGateway, http: aiohttp.ClientSession, signer: WalletSigner, db: asyncpg.Connection
) -> None:
    await create_account(db, signer.pubkey)
    token = await open_session(http, signer, gateway.url)
    bearer = {"Authorization": f"Bearer {token}"}
    assert (await request(http, "GET", gateway.url + "/account/info", headers=bearer)).status == 200
    out = await request(http, "POST", gateway.url + "/auth/logout", body=b"{}", headers=bearer)
    assert (out.status, out.json) == (200, {"status": "ok"})
    after = await request(http, "GET", gateway.url + "/account/info", headers=bearer)
    assert (after.status, after.code) == (401, "AUTH_FAILED")
    again = await request(http, "POST", gateway.url + "/auth/logout", body=b"{}", headers=bearer)
    assert (again.status, again.code) == (401, "AUTH_FAILED")


async def test_logout_needs_a_bearer_token(
    gateway: RunningGateway, http: aiohttp.ClientSession, signer: WalletSigner
) -> None:
    bare = await request(http, "POST", gateway.url + "/auth/logout", body=b"{}")
    assert (bare.status, bare.code) == (401, "AUTH_FAILED")
    key = await create_api_key(http, signer, gateway.url)
    with_key = await request(http, "POST", gateway.url + "/auth/logout", body=b"{}", headers={"X-Api-Key": key})
    assert (with_key.status, with_key.code) == (401, "AUTH_FAILED")
    assert "session token" in with_key.json["error"]["message"]


@pytest.mark.parametrize("authorization", ["Bearer", "Bearer nothex", "Basic dXNlcjpwYXNz", "Bearer " + "0" * 64])
async def test_bad_bearer_is_401(gateway: RunningGateway, http: aiohttp.ClientSession, authorization: str) -> None:
    answer = await request(http, "POST", gateway.url + "/", body=RPC_BODY, headers={"Authorization": authorization})
    assert (answer.status, answer.code) == (401, "AUTH_FAILED"), answer


@pytest.fixture(scope="module")
async def short_lived(settings: Settings) -> AsyncIterator[RunningGateway]:
    """A gateway whose challenges live 150 ms and tokens 1 s (sliding)."""
    async with serve_gateway(settings, challenge_ttl_ms=150, token_ttl_ms=1000) as running:
        yield running


async def test_expired_challenge_is_401(
    short_lived: RunningGateway, http: aiohttp.ClientSession, signer: WalletSigner
) -> None:
    challenge = await _challenge(http, short_lived.url, signer.pubkey)
    await asyncio.sleep(0.3)
    document = {"pubkey": signer.pubkey, "challenge": challenge, "signature": signer.sign_challenge(challenge)}
    assert await _verify(http, short_lived.url, document) == (401, "AUTH_FAILED")


async def test_token_ttl_slides_then_expires(
    short_lived: RunningGateway, http: aiohttp.ClientSession, signer: WalletSigner, db: asyncpg.Connection
) -> None:
    await create_account(db, signer.pubkey)
    token = await open_session(http, signer, short_lived.url)
    bearer = {"Authorization": f"Bearer {token}"}
    for _ in range(3):  # 3 x 400 ms outlives the 1 s TTL only because each use slides it (600 ms to spare)
        await asyncio.sleep(0.4)
        assert (await request(http, "GET", short_lived.url + "/account/info", headers=bearer)).status == 200
    await asyncio.sleep(1.3)
    expired = await request(http, "GET", short_lived.url + "/account/info", headers=bearer)
    assert (expired.status, expired.code) == (401, "AUTH_FAILED")

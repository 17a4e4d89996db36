"""API keys over real HTTP: creation under wallet auth only, use, rotation, legacy keys, ref codes."""

from __future__ import annotations

import hashlib
import hmac
import os
import re
from pathlib import Path

import aiohttp
import asyncpg
import orjson
import pytest

from gateway.auth.api_keys import ApiKeyRotated
from gateway.auth.key_secret import SECRET_FILE
from gateway.core.credentials import grpc_credentials, websocket_credentials
from gateway.core.identity import Identity
from gateway.pipeline.http import http_call
from gateway.pipeline.stages import Call, Wire
from gateway_client import WalletSigner
from tests.auth.helpers import RPC_BODY, create_account, create_api_key, open_session, request, signed
from tests.support import RunningGateway

KEY_FORMAT = re.compile(r"srpc_live_[A-Za-z0-9_-]{43}")


async def test_create_and_use_a_key(
    gateway: RunningGateway, http: aiohttp.ClientSession, signer: WalletSigner, db: asyncpg.Connection
) -> None:
    answer = await signed(http, signer, "POST", gateway.url, "/account/api-key", b"{}")
    assert answer.status == 200, answer
    assert answer.json["ok"] is True and answer.json["message"]
    key = answer.json["api_key"]
    assert KEY_FORMAT.fullmatch(key)
    assert await db.fetchval("SELECT count(*) FROM accounts WHERE pubkey = $1", signer.pubkey) == 1
    info = await request(http, "GET", gateway.url + "/account/info", headers={"X-Api-Key": key})
    assert (info.status, info.json["pubkey"], info.json["balance"]) == (200, signer.pubkey, 0)
    unpaid = await request(http, "POST", gateway.url + "/", body=RPC_BODY, headers={"X-Api-Key": key})
    assert (unpaid.status, unpaid.json["error"]["code"]) == (402, -32010), unpaid

    await create_account(db, signer.pubkey)  # a deposit of 0.1 USDC: 10,000 credits
    gateway.app.meter.invalidate(signer.pubkey)  # as confirm-deposit does; else the 1 s "short" cache decides
    by_header = await request(http, "POST", gateway.url + "/", body=RPC_BODY, headers={"X-Api-Key": key})
    assert by_header.status == 200, by_header
    by_query = await request(http, "POST", gateway.url + "/", body=RPC_BODY, params={"api-key": key})
    assert by_query.status == 200, by_query
    info = await request(http, "GET", gateway.url + "/account/info", headers={"X-Api-Key": key})
    assert (info.status, info.json["balance"]) == (200, 10_000 - 2), info


async def test_empty_body_is_accepted_as_empty_object(
    gateway: RunningGateway, http: aiohttp.ClientSession, signer: WalletSigner
) -> None:
    answer = await signed(http, signer, "POST", gateway.url, "/account/api-key", b"")
    assert answer.status == 200, answer


async def test_only_the_hmac_is_stored(
    gateway: RunningGateway, http: aiohttp.ClientSession, signer: WalletSigner, db: asyncpg.Connection, auth_home: Path
) -> None:
    key = await create_api_key(http, signer, gateway.url)
    secret = (auth_home / SECRET_FILE).read_bytes()
    assert len(secret) == 32 and (auth_home / SECRET_FILE).stat().st_mode & 0o777 == 0o600
    stored = await db.fetchval("SELECT key_hash FROM api_keys WHERE pubkey = $1 AND revoked_at IS NULL", signer.pubkey)
    assert bytes(stored) == hmac.new(secret, key.encode(), hashlib.sha256).digest()


@pytest.mark.usefixtures("funded")
async def test_header_is_checked_before_query(
    gateway: RunningGateway, http: aiohttp.ClientSession, signer: WalletSigner
) -> None:
    key = await create_api_key(http, signer, gateway.url)
    good_header = await request(
        http, "POST", gateway.url + "/", body=RPC_BODY, headers={"X-Api-Key": key}, params={"api-key": "nope"}
    )
    assert good_header.status == 200
    bad_header = await request(
        http, "POST", gateway.url + "/", body=RPC_BODY, headers={"X-Api-Key": "nope"}, params={"api-key": key}
    )
    assert (bad_header.status, bad_header.code) == (401, "AUTH_FAILED")


@pytest.mark.usefixtures("funded")
async def test_api_key_outranks_bad_wallet_headers(
    gateway: RunningGateway, http: aiohttp.ClientSession, signer: WalletSigner
) -> None:
    key = await create_api_key(http, signer, gateway.url)
    headers = {"X-Api-Key": key, "X-Pubkey": "garbage"}
    assert (await request(http, "POST", gateway.url + "/", body=RPC_BODY, headers=headers)).status == 200


async def test_invalid_keys_are_401(gateway: RunningGateway, http: aiohttp.ClientSession) -> None:
    for key in ["", "srpc_live_short", "srpc_live_" + "A" * 43, "ab" * 32, "x" * 5000]:
        answer = await request(http, "POST", gateway.url + "/", body=RPC_BODY, headers={"X-Api-Key": key})
        assert (answer.status, answer.code) == (401, "AUTH_FAILED"), (key[:20], answer)


async def test_key_creation_requires_a_wallet_signature(
    gateway: RunningGateway, http: aiohttp.ClientSession, signer: WalletSigner
) -> None:
    key = await create_api_key(http, signer, gateway.url)
    with_key = await request(http, "POST", gateway.url + "/account/api-key", body=b"{}", headers={"X-Api-Key": key})
    assert (with_key.status, with_key.code) == (401, "AUTH_FAILED")
    assert "wallet signature" in with_key.json["error"]["message"]

    token = await open_session(http, signer, gateway.url)
    bearer = {"Authorization": f"Bearer {token}"}
    with_token = await request(http, "POST", gateway.url + "/account/api-key", body=b"{}", headers=bearer)
    assert (with_token.status, with_token.code) == (401, "AUTH_FAILED")
    assert "wallet signature" in with_token.json["error"]["message"]

    nothing = await request(http, "POST", gateway.url + "/account/api-key", body=b"{}")
    assert (nothing.status, nothing.code) == (402, -32002)


async def test_bad_key_request_bodies_are_400(
    gateway: RunningGateway, http: aiohttp.ClientSession, signer: WalletSigner
) -> None:
    for body in [b"[]", b"nope", b'{"ref_code": 5}', b"\xff"]:
        answer = await signed(http, signer, "POST", gateway.url, "/account/api-key", body)
        assert (answer.status, answer.code) == (400, "INVALID_REQUEST"), (body, answer)


@pytest.mark.usefixtures("funded")
async def test_rotation_revokes_the_previous_key(
    gateway: RunningGateway,
    http: aiohttp.ClientSession,
    signer: WalletSigner,
    db: asyncpg.Connection,
    rotations: list[ApiKeyRotated],
) -> None:
    authenticator = gateway.app.auth.authenticator

    def from_cache(key: str) -> Identity | None:  # what the auth stage tries first, without an await
        return authenticator.from_cache(http_call("POST", "/", {"x-api-key": key}, RPC_BODY))

    first = await create_api_key(http, signer, gateway.url)
    assert (await request(http, "POST", gateway.url + "/", body=RPC_BODY, headers={"X-Api-Key": first})).status == 200
    assert from_cache(first) == Identity(signer.pubkey, "api_key")
    second = await create_api_key(http, signer, gateway.url)
    assert second != first
    assert from_cache(first) is None  # the rotation evicted it at once
    old = await request(http, "POST", gateway.url + "/", body=RPC_BODY, headers={"X-Api-Key": first})
    assert (old.status, old.code) == (401, "AUTH_FAILED")
    new = await request(http, "POST", gateway.url + "/", body=RPC_BODY, headers={"X-Api-Key": second})
    assert new.status == 200
    counts = await db.fetchrow(
        """SELECT count(*) AS total, count(*) FILTER (WHERE revoked_at IS NULL) AS active
           FROM api_keys WHERE pubkey = $1""",
        signer.pubkey,
    )
    assert (counts["total"], counts["active"]) == (2, 1)
    mine = [e for e in rotations if e.pubkey == signer.pubkey]
    assert [e.replaced_previous for e in mine] == [False, True]
    assert all(e.event == "api_key.rotated" for e in mine)


async def test_legacy_hex_keys_are_accepted(
    gateway: RunningGateway, http: aiohttp.ClientSession, signer: WalletSigner, db: asyncpg.Connection, auth_home: Path
) -> None:
    await create_account(db, signer.pubkey)
    legacy = os.urandom(32).hex()
    digest = hmac.new((auth_home / SECRET_FILE).read_bytes(), legacy.encode(), hashlib.sha256).digest()
    await db.execute("INSERT INTO api_keys (pubkey, key_hash) VALUES ($1, $2)", signer.pubkey, digest)
    answer = await request(http, "POST", gateway.url + "/", body=RPC_BODY, headers={"X-Api-Key": legacy})
    assert answer.status == 200, answer


async def test_ref_code_is_captured_once_at_creation(
    gateway: RunningGateway, http: aiohttp.ClientSession, signer: WalletSigner, db: asyncpg.Connection
) -> None:
    owner = WalletSigner(os.urandom(32))
    await create_account(db, owner.pubkey)
    live, later, expired = (f"{tag}-{os.urandom(4).hex()}" for tag in ("live", "later", "expired"))
    await db.execute(
        "INSERT INTO referral_codes (code, owner_pubkey, bonus_percent) VALUES ($1, $2, 5)", live, owner.pubkey
    )
    await db.execute(
        "INSERT INTO referral_codes (code, owner_pubkey, bonus_percent) VALUES ($1, $2, 5)", later, owner.pubkey
    )
    await db.execute("INSERT INTO referral_codes VALUES ($1, $2, 5, now() - interval '1 day')", expired, owner.pubkey)
    await create_api_key(http, signer, gateway.url, orjson.dumps({"ref_code": live}))
    await create_api_key(http, signer, gateway.url, orjson.dumps({"ref_code": later}))
    assert await db.fetchval("SELECT ref_code FROM accounts WHERE pubkey = $1", signer.pubkey) == live

    for code in (expired, "unknown-code", "x" * 500):
        fresh = WalletSigner(os.urandom(32))
        await create_api_key(http, fresh, gateway.url, orjson.dumps({"ref_code": code}))
        assert await db.fetchval("SELECT ref_code FROM accounts WHERE pubkey = $1", fresh.pubkey) is None


async def test_websocket_and_grpc_credentials_authenticate(
    gateway: RunningGateway, http: aiohttp.ClientSession, signer: WalletSigner
) -> None:
    """Credentials as the WebSocket and gRPC transports extract them, proved by the same authenticator."""
    key = await create_api_key(http, signer, gateway.url)
    token = await open_session(http, signer, gateway.url)
    authenticator = gateway.app.auth.authenticator  # type: ignore[attr-defined]

    def ws(headers: dict[str, str]) -> Call:
        credentials = websocket_credentials(headers).credentials
        return Call("GET", "/ws", headers, {}, b"", credentials=credentials, wire=Wire.WEBSOCKET)

    def grpc(metadata: dict[str, str]) -> Call:
        return Call("POST", "/geyser.Geyser/Subscribe", {}, {}, b"", grpc_credentials(metadata), wire=Wire.GRPC)

    ws_key = await authenticator.authenticate(ws({"sec-websocket-protocol": f"auth.{key}, solana-rpc"}))
    assert (ws_key.pubkey, ws_key.mode) == (signer.pubkey, "api_key")
    ws_bearer = await authenticator.authenticate(ws({"authorization": f"Bearer {token}"}))
    assert (ws_bearer.pubkey, ws_bearer.mode) == (signer.pubkey, "session")
    grpc_key = await authenticator.authenticate(grpc({"x-token": key}))
    assert (grpc_key.pubkey, grpc_key.mode) == (signer.pubkey, "api_key")
    grpc_session = await authenticator.authenticate(grpc({"x-token": token}))
    assert (grpc_session.pubkey, grpc_session.mode) == (signer.pubkey, "session")

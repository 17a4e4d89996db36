"""Owner sessions (Sign-In With Solana naming this gateway's domain) and the account's sessions routes,
over real HTTP and WebSockets against the in-process gateway (embedded PostgreSQL and Redis, the devnode)."""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import aiohttp
import asyncpg
import orjson
import pytest
import redis.asyncio as aioredis
from websockets.asyncio.client import ClientConnection, connect

from devnode.node import Devnode
from gateway.app.settings import Settings
from gateway.auth.sign_in import iso, message_text
from gateway.auth.store.sessions import Resolved, SessionStore, token_digest
from gateway.auth.strategies import TokenStrategy
from gateway.core.credentials import Credentials
from gateway.pipeline.stages import Call
from gateway_client import WalletSigner
from tests.auth.helpers import Answer, create_account, create_api_key, open_session, request, signed
from tests.pubsub.test_ws import ask, close_code, ws_url
from tests.sending.conftest import sending_settings
from tests.support import TEST_IP_LIMITS, RunningGateway, serve_gateway

PUBLIC = "https://gateway.example.com"
DOMAIN = "gateway.example.com"
GET_SLOT = b'{"jsonrpc":"2.0","id":1,"method":"getSlot"}'


@pytest.fixture(scope="module")
def settings(tmp_path_factory: pytest.TempPathFactory, database_url: str, redis_url: str, devnode: Devnode) -> Settings:
    home = tmp_path_factory.mktemp("owner-sessions")
    return sending_settings(
        home, database_url, redis_url, devnode.rpc_url, upstream_ws_url=devnode.ws_url, public_url=PUBLIC
    )


@pytest.fixture(scope="module")
async def gateway(settings: Settings) -> AsyncIterator[RunningGateway]:
    async with serve_gateway(settings) as running:
        yield running


@pytest.fixture
async def http() -> AsyncIterator[aiohttp.ClientSession]:
    async with aiohttp.ClientSession() as session:
        yield session


@pytest.fixture
def signer() -> WalletSigner:
    return WalletSigner(os.urandom(32))


async def challenge(http: aiohttp.ClientSession, gateway: RunningGateway, pubkey: str) -> dict[str, Any]:
    answer = await request(http, "POST", gateway.url + "/auth/challenge", body=orjson.dumps({"pubkey": pubkey}))
    assert answer.status == 200, answer
    return dict(answer.json)


async def verify(
    http: aiohttp.ClientSession,
    gateway: RunningGateway,
    document: dict[str, str],
    headers: dict[str, str] | None = None,
) -> Answer:
    return await request(http, "POST", gateway.url + "/auth/verify", body=orjson.dumps(document), headers=headers)


async def sign_in(
    http: aiohttp.ClientSession,
    gateway: RunningGateway,
    signer: WalletSigner,
    headers: dict[str, str] | None = None,
    **changes: Any,
) -> Answer:
    """Sign the challenge's ``sign_in`` as a wallet's ``solana:signIn`` does (with ``changes`` made to it)."""
    fields = {**(await challenge(http, gateway, signer.pubkey))["sign_in"], **changes}
    text = message_text(fields)
    document = {"pubkey": signer.pubkey, "message": text, "signature": signer.sign(text.encode())}
    return await verify(http, gateway, document, headers)


async def owner_session(
    http: aiohttp.ClientSession, gateway: RunningGateway, signer: WalletSigner, **headers: str
) -> str:
    answer = await sign_in(http, gateway, signer, headers)
    assert answer.status == 200 and answer.json["owner"] is True, answer
    return str(answer.json["token"])


async def closed_at_once(ws: ClientConnection) -> tuple[int | None, str]:
    """How the socket closed, within 3 s: by the revocation, not by the 30 s re-check of held credentials."""
    async with asyncio.timeout(3):
        code, reason = await close_code(ws)
    return code, reason or ""


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


async def listing(
    http: aiohttp.ClientSession, gateway: RunningGateway, headers: dict[str, str]
) -> list[dict[str, Any]]:
    answer = await request(http, "GET", gateway.url + "/account/sessions", headers=headers)
    assert answer.status == 200, answer
    assert answer.json["max_sessions"] == 20
    return list(answer.json["sessions"])


async def test_challenge_offers_a_sign_in_naming_the_configured_domain(
    gateway: RunningGateway, http: aiohttp.ClientSession, signer: WalletSigner
) -> None:
    answer = await challenge(http, gateway, signer.pubkey)
    fields = answer["sign_in"]
    assert fields["domain"] == DOMAIN and fields["uri"] == PUBLIC and fields["version"] == "1"
    assert fields["address"] == signer.pubkey and fields["nonce"] == answer["challenge"]
    issued = datetime.fromisoformat(fields["issuedAt"])
    expires = datetime.fromisoformat(fields["expirationTime"])
    assert abs(issued - datetime.now(UTC)) < timedelta(seconds=5) and expires - issued == timedelta(seconds=300)
    assert "chainId" not in fields


async def test_both_ways_make_a_session_and_only_the_sign_in_an_owner_one(
    gateway: RunningGateway, http: aiohttp.ClientSession, signer: WalletSigner, db: asyncpg.Connection
) -> None:
    await create_account(db, signer.pubkey)
    owner = await sign_in(http, gateway, signer)
    assert owner.status == 200 and owner.json["owner"] is True and owner.json["expires_in"] == 3600, owner
    hex_challenge = (await challenge(http, gateway, signer.pubkey))["challenge"]
    plain = {"pubkey": signer.pubkey, "challenge": hex_challenge, "signature": signer.sign_challenge(hex_challenge)}
    ordinary = await verify(http, gateway, plain)
    assert ordinary.status == 200 and ordinary.json["owner"] is False, ordinary
    for token in (owner.json["token"], ordinary.json["token"]):
        info = await request(http, "GET", gateway.url + "/account/info", headers=bearer(token))
        assert info.status == 200, info


@pytest.mark.parametrize(
    ("changes", "headers", "said"),
    [
        ({"domain": "evil.example"}, None, "not to this gateway"),
        ({"domain": "evil.example"}, {"Host": "evil.example"}, "not to this gateway"),  # Host is never believed
        ({"domain": "127.0.0.1"}, None, "not to this gateway"),
        ({"uri": "https://evil.example"}, None, "URI"),
        ({"version": "2"}, None, "Version"),
        ({"nonce": "ab" * 32}, None, "challenge expired, already used, or not issued"),
        ({"issuedAt": timedelta(minutes=5)}, None, "in the future"),
        ({"issuedAt": -timedelta(minutes=10)}, None, "ago"),
        ({"expirationTime": -timedelta(seconds=1)}, None, "expired"),
        ({"expirationTime": None}, None, "no Expiration Time"),
        ({"issuedAt": None}, None, "no Issued At"),
        ({"nonce": None}, None, "no Nonce"),
    ],
)
async def test_a_sign_in_that_is_not_for_this_gateway_now_is_401(
    gateway: RunningGateway,
    http: aiohttp.ClientSession,
    signer: WalletSigner,
    changes: dict[str, Any],
    headers: dict[str, str] | None,
    said: str,
) -> None:
    # A time is given as its distance from now, read when the test runs: read at collection, "5 minutes from now"
    # had passed by the time a worker ran the test (an xdist run collects everything first).
    now = datetime.now(UTC)
    changes = {k: iso(now + v) if isinstance(v, timedelta) else v for k, v in changes.items()}
    answer = await sign_in(http, gateway, signer, headers, **changes)
    assert (answer.status, answer.code) == (401, "AUTH_FAILED"), answer
    assert said in answer.json["error"]["message"], answer


async def test_a_sign_in_for_another_address_or_signed_by_another_key_is_401(
    gateway: RunningGateway, http: aiohttp.ClientSession, signer: WalletSigner
) -> None:
    other = WalletSigner(os.urandom(32))
    answer = await sign_in(http, gateway, signer, address=other.pubkey)
    assert (answer.status, answer.code) == (401, "AUTH_FAILED") and "address" in answer.json["error"]["message"]
    fields = (await challenge(http, gateway, signer.pubkey))["sign_in"]
    text = message_text(fields)
    forged = {"pubkey": signer.pubkey, "message": text, "signature": other.sign(text.encode())}
    refused = await verify(http, gateway, forged)
    assert (refused.status, refused.code) == (401, "AUTH_FAILED") and "does not verify" in refused.json["error"][
        "message"
    ]
    genuine = {**forged, "signature": signer.sign(text.encode())}  # the forgery did not burn the challenge
    assert (await verify(http, gateway, genuine)).status == 200


async def test_a_sign_in_is_accepted_once(
    gateway: RunningGateway, http: aiohttp.ClientSession, signer: WalletSigner
) -> None:
    fields = (await challenge(http, gateway, signer.pubkey))["sign_in"]
    text = message_text(fields)
    document = {"pubkey": signer.pubkey, "message": text, "signature": signer.sign(text.encode())}
    assert (await verify(http, gateway, document)).status == 200
    replayed = await verify(http, gateway, document)
    assert (replayed.status, replayed.code) == (401, "AUTH_FAILED"), replayed
    # the nonce is the hex challenge: it is not accepted the other way either
    hex_way = {
        "pubkey": signer.pubkey,
        "challenge": fields["nonce"],
        "signature": signer.sign_challenge(fields["nonce"]),
    }
    assert (await verify(http, gateway, hex_way)).status == 401


@pytest.mark.parametrize(
    ("message", "said"),
    [
        ("x" * 2049, "longer than 2048"),
        ("hello", "not a Sign-In With Solana text"),
        ("SURROGATE", "valid UTF-8 JSON"),  # a lone surrogate, escaped in the JSON text
    ],
)
async def test_a_message_that_is_not_the_sign_in_text_is_400(
    gateway: RunningGateway, http: aiohttp.ClientSession, signer: WalletSigner, message: str, said: str
) -> None:
    document = {"pubkey": signer.pubkey, "message": message, "signature": signer.sign(b"x")}
    body = orjson.dumps(document).replace(b"SURROGATE", b"\\ud800")
    answer = await request(http, "POST", gateway.url + "/auth/verify", body=body)
    assert (answer.status, answer.code) == (400, "INVALID_REQUEST") and said in answer.json["error"]["message"], answer
    both = {**document, "challenge": "ab" * 32}
    answer = await request(http, "POST", gateway.url + "/auth/verify", body=orjson.dumps(both))
    assert (answer.status, answer.code) == (400, "INVALID_REQUEST"), answer


async def test_a_sign_in_with_fields_never_asked_for_is_refused(
    gateway: RunningGateway, http: aiohttp.ClientSession, signer: WalletSigner
) -> None:
    for extra in ({"chainId": "mainnet"}, {"requestId": "7"}, {"resources": ["https://evil.example"]}):
        answer = await sign_in(http, gateway, signer, **extra)
        assert (answer.status, answer.code) == (400, "INVALID_REQUEST"), answer
        assert "never asks for" in answer.json["error"]["message"]


async def test_an_owner_session_is_not_bound_by_the_rules_an_ordinary_one_is(
    gateway: RunningGateway, http: aiohttp.ClientSession, signer: WalletSigner, db: asyncpg.Connection
) -> None:
    await create_api_key(http, signer, gateway.url)
    await create_account(db, signer.pubkey)
    rules = await signed(
        http, signer, "POST", gateway.url, "/account/access", orjson.dumps({"methods": ["getBalance"]})
    )
    assert rules.status == 200, rules
    ordinary = await open_session(http, signer, gateway.url)
    owner = await owner_session(http, gateway, signer)
    refused = await request(http, "POST", gateway.url + "/", body=GET_SLOT, headers=bearer(ordinary))
    assert refused.status == 403 and refused.json["error"]["code"] == -32030, refused
    served = await request(http, "POST", gateway.url + "/", body=GET_SLOT, headers=bearer(owner))
    assert served.status == 200 and isinstance(served.json["result"], int), served


async def test_sessions_are_listed_newest_first_without_their_tokens(
    gateway: RunningGateway, http: aiohttp.ClientSession, signer: WalletSigner, db: asyncpg.Connection
) -> None:
    page = {"Origin": PUBLIC, "User-Agent": "Mozilla/5.0 (test) " + "x" * 400}
    owner = await owner_session(http, gateway, signer, **page)
    await asyncio.sleep(0.01)
    ordinary = await open_session(http, signer, gateway.url)
    key = await create_api_key(http, signer, gateway.url)
    answer = await request(http, "GET", gateway.url + "/account/sessions", headers=bearer(ordinary))
    assert owner not in answer.raw.decode() and ordinary not in answer.raw.decode()
    newest, oldest = await listing(http, gateway, bearer(ordinary))
    assert (newest["owner"], newest["current"], newest["origin"]) == (False, True, None)
    assert (oldest["owner"], oldest["current"], oldest["origin"]) == (True, False, PUBLIC)
    assert oldest["user_agent"].startswith("Mozilla/5.0 (test) ") and len(oldest["user_agent"]) == 256
    assert newest["created_at"] >= oldest["created_at"] and newest["created_at"].endswith("Z")
    assert {len(entry["id"]) for entry in (newest, oldest)} == {20}
    by_key = await listing(http, gateway, {"X-Api-Key": key})  # any credential of the account reads them
    assert [entry["id"] for entry in by_key] == [newest["id"], oldest["id"]]
    assert not any(entry["current"] for entry in by_key)
    stranger = WalletSigner(os.urandom(32))
    assert await listing(http, gateway, bearer(await open_session(http, stranger, gateway.url))) != by_key


async def test_last_used_follows_use(
    gateway: RunningGateway, http: aiohttp.ClientSession, signer: WalletSigner
) -> None:
    token = await open_session(http, signer, gateway.url)
    (first,) = await listing(http, gateway, bearer(token))
    await asyncio.sleep(1.2)
    (second,) = await listing(http, gateway, bearer(token))  # the listing's own request used it
    assert second["last_used_at"] > first["last_used_at"] and second["created_at"] == first["created_at"]


async def test_only_the_wallet_or_an_owner_session_ends_sessions(
    gateway: RunningGateway, http: aiohttp.ClientSession, signer: WalletSigner
) -> None:
    ordinary = await open_session(http, signer, gateway.url)
    key = await create_api_key(http, signer, gateway.url)
    (entry,) = await listing(http, gateway, bearer(ordinary))
    for headers in (bearer(ordinary), {"X-Api-Key": key}):
        for path in ("/account/sessions", f"/account/sessions/{entry['id']}"):
            answer = await request(http, "DELETE", gateway.url + path, headers=headers)
            assert (answer.status, answer.code) == (403, "ACCESS_DENIED"), answer
            assert "sign this request with the wallet" in answer.json["error"]["message"]
    assert len(await listing(http, gateway, bearer(ordinary))) == 1


async def test_ending_all_keeps_the_callers_owner_session_and_ends_the_rest_everywhere(
    gateway: RunningGateway,
    http: aiohttp.ClientSession,
    signer: WalletSigner,
    db: asyncpg.Connection,
    redis_client: aioredis.Redis,
) -> None:
    await create_account(db, signer.pubkey)
    await create_api_key(http, signer, gateway.url)
    owner = await owner_session(http, gateway, signer)
    other_owner = await owner_session(http, gateway, signer)
    ordinary = await open_session(http, signer, gateway.url)
    async with connect(ws_url(gateway), additional_headers=bearer(ordinary)) as ws:
        assert isinstance((await ask(ws, "getSlot"))["result"], int)
        answer = await request(http, "DELETE", gateway.url + "/account/sessions", headers=bearer(owner))
        assert (answer.status, answer.json) == (200, {"ok": True, "ended": 2}), answer
        code, reason = await closed_at_once(ws)
        assert code == 1008 and "logged out" in reason, (code, reason)
    for token in (ordinary, other_owner):
        after = await request(http, "GET", gateway.url + "/account/info", headers=bearer(token))
        assert (after.status, after.code) == (401, "AUTH_FAILED"), after
    (left,) = await listing(http, gateway, bearer(owner))
    assert left["current"] and left["owner"]
    assert await redis_client.hlen(f"sessions:{signer.pubkey}") == 1  # the index holds only the live one
    body = b""
    by_wallet = await request(
        http, "DELETE", gateway.url + "/account/sessions", headers=signer.headers("DELETE", "/account/sessions", body)
    )
    assert (by_wallet.status, by_wallet.json) == (200, {"ok": True, "ended": 1}), by_wallet
    gone = await request(http, "GET", gateway.url + "/account/info", headers=bearer(owner))
    assert gone.status == 401


async def test_ending_one_by_id(
    gateway: RunningGateway, http: aiohttp.ClientSession, signer: WalletSigner, db: asyncpg.Connection
) -> None:
    await create_account(db, signer.pubkey)
    await create_api_key(http, signer, gateway.url)
    owner = await owner_session(http, gateway, signer)
    ordinary = await open_session(http, signer, gateway.url)
    stranger = WalletSigner(os.urandom(32))
    (foreign,) = await listing(http, gateway, bearer(await open_session(http, stranger, gateway.url)))
    entries = await listing(http, gateway, bearer(owner))
    target = next(entry for entry in entries if not entry["owner"])
    for wrong in (foreign["id"], "0" * 20, "not-an-id", "x" * 300):
        missing = await request(http, "DELETE", gateway.url + f"/account/sessions/{wrong}", headers=bearer(owner))
        assert (missing.status, missing.code) == (404, "NOT_FOUND"), missing
    async with connect(ws_url(gateway), additional_headers=bearer(ordinary)) as ws:
        assert isinstance((await ask(ws, "getSlot"))["result"], int)
        path = f"/account/sessions/{target['id']}"
        answer = await request(http, "DELETE", gateway.url + path, headers=bearer(owner))
        assert (answer.status, answer.json) == (200, {"ok": True, "ended": 1}), answer
        code, _ = await closed_at_once(ws)
        assert code == 1008
    after = await request(http, "GET", gateway.url + "/account/info", headers=bearer(ordinary))
    assert (after.status, after.code) == (401, "AUTH_FAILED")
    again = await request(http, "DELETE", gateway.url + path, headers=bearer(owner))
    assert (again.status, again.code) == (404, "NOT_FOUND")
    assert await listing(http, gateway, bearer(stranger_token := await open_session(http, stranger, gateway.url)))
    assert stranger_token  # the stranger's own session was never touched
    assert len(await listing(http, gateway, bearer(stranger_token))) == 2


async def test_the_cap_ends_the_oldest_ordinary_session_and_never_an_owner_one(
    gateway: RunningGateway, http: aiohttp.ClientSession, signer: WalletSigner, db: asyncpg.Connection
) -> None:
    await create_account(db, signer.pubkey)
    owner = await owner_session(http, gateway, signer)
    ordinary = [await open_session(http, signer, gateway.url) for _ in range(19)]
    async with connect(ws_url(gateway), additional_headers=bearer(ordinary[0])) as ws:
        assert isinstance((await ask(ws, "getSlot"))["result"], int)
        newest = await open_session(http, signer, gateway.url)  # the 21st: the oldest ordinary one ends
        code, _ = await closed_at_once(ws)
        assert code == 1008
    assert (await request(http, "GET", gateway.url + "/account/sessions", headers=bearer(ordinary[0]))).status == 401
    entries = await listing(http, gateway, bearer(newest))
    assert len(entries) == 20 and sum(entry["owner"] for entry in entries) == 1
    assert (await request(http, "GET", gateway.url + "/account/sessions", headers=bearer(owner))).status == 200
    await owner_session(http, gateway, signer)  # an owner session ends the oldest ordinary one too
    assert (await request(http, "GET", gateway.url + "/account/sessions", headers=bearer(ordinary[1]))).status == 401
    assert sum(entry["owner"] for entry in await listing(http, gateway, bearer(owner))) == 2


async def test_an_ordinary_session_is_refused_when_every_live_one_is_an_owner_session(
    gateway: RunningGateway, http: aiohttp.ClientSession, signer: WalletSigner
) -> None:
    owners = [await owner_session(http, gateway, signer) for _ in range(20)]
    hex_challenge = (await challenge(http, gateway, signer.pubkey))["challenge"]
    plain = {"pubkey": signer.pubkey, "challenge": hex_challenge, "signature": signer.sign_challenge(hex_challenge)}
    refused = await verify(http, gateway, plain)
    assert (refused.status, refused.code) == (429, "CONCURRENCY_LIMITED"), refused
    assert 0 < int(refused.headers["retry-after"]) <= 3600
    assert len(await listing(http, gateway, bearer(owners[0]))) == 20
    await owner_session(http, gateway, signer)  # an owner session ends the oldest owner session
    assert (await request(http, "GET", gateway.url + "/account/info", headers=bearer(owners[0]))).status == 401


async def test_the_index_expires_with_its_sessions(
    tmp_path: Path, settings: Settings, redis_client: aioredis.Redis
) -> None:
    async with serve_gateway(settings, token_ttl_ms=1_500) as gw, aiohttp.ClientSession() as http:
        signer = WalletSigner(os.urandom(32))
        token = await open_session(http, signer, gw.url)
        index = f"sessions:{signer.pubkey}"
        assert 0 < await redis_client.pttl(index) <= 1_500
        await asyncio.sleep(1.0)
        assert len(await listing(http, gw, bearer(token))) == 1  # a use slides the index too
        assert await redis_client.pttl(index) > 1_000
        await asyncio.sleep(1.7)
        assert await redis_client.exists(index, f"session:{token}") == 0


async def test_a_grpc_x_token_keeps_its_sessions_kind(
    gateway: RunningGateway, http: aiohttp.ClientSession, signer: WalletSigner
) -> None:
    auth = gateway.app.auth
    assert auth.api_keys is not None and auth.sessions is not None
    strategy = TokenStrategy(auth.api_keys, auth.sessions)
    for token, owner in (
        (await owner_session(http, gateway, signer), True),
        (await open_session(http, signer, gateway.url), False),
    ):
        call = Call("POST", "/geyser.Geyser/Subscribe", {}, {}, b"", credentials=Credentials(token=token))
        identity = await strategy.authenticate(call.credentials, call, require_account=False)
        assert (identity.pubkey, identity.mode, identity.owner) == (signer.pubkey, "session", owner)


class CountingConnection:
    """Mixed into a Redis connection: counts the commands (or pipelines) it writes, one write a round trip."""

    writes = 0

    async def send_packed_command(self, command: Any, check_health: bool = True) -> None:
        CountingConnection.writes += 1
        await super().send_packed_command(command, check_health)  # type: ignore[misc]


async def test_resolving_a_session_is_one_round_trip(redis_url: str) -> None:
    pool = aioredis.ConnectionPool.from_url(redis_url)
    pool.connection_class = type("Counting", (CountingConnection, pool.connection_class), {})  # TCP or unix socket
    client = aioredis.Redis(connection_pool=pool)
    try:
        store = SessionStore(client)
        owner, _ = await store.open(pubkey := WalletSigner(os.urandom(32)).pubkey, owner=True)
        ordinary = await store.issue_token(pubkey)
        assert await store.resolve(owner) == Resolved(pubkey, True)  # the script is loaded by now
        for token, kind in ((owner, True), (ordinary, False), ("ab" * 32, None)):
            before = CountingConnection.writes
            resolved = await store.resolve(token)
            assert CountingConnection.writes - before == 1
            assert (resolved.owner if resolved else None) == kind
    finally:
        await client.aclose()


async def test_a_session_written_before_the_index_is_not_accepted(
    gateway: RunningGateway, http: aiohttp.ClientSession, signer: WalletSigner, redis_client: aioredis.Redis
) -> None:
    token = os.urandom(32).hex()
    await redis_client.set(f"session:{token_digest(token)}", signer.pubkey, px=60_000)  # the old layout's value
    answer = await request(http, "GET", gateway.url + "/account/sessions", headers=bearer(token))
    assert (answer.status, answer.code) == (401, "AUTH_FAILED"), answer


async def test_the_sessions_routes_are_limited_per_address_before_any_credential_is_looked_at(
    settings: Settings, db: asyncpg.Connection
) -> None:
    tight = {**TEST_IP_LIMITS, "session": {"rps": 0.01, "burst": 2}, "account_read": {"rps": 0.01, "burst": 2}}
    limited = Settings.model_validate({**settings.model_dump(), "ip_limits": tight})
    async with serve_gateway(limited) as gw, aiohttp.ClientSession() as http:
        groups = {  # each group's burst of 2, then 429 before the bearer token is looked up
            "session": [
                ("DELETE", "/account/sessions"),
                ("DELETE", "/account/sessions/x"),
                ("DELETE", "/account/sessions"),
            ],
            "account_read": [("GET", "/account/sessions")] * 3,
        }
        for group, calls in groups.items():
            statuses = []
            for method, path in calls:
                headers = {"Authorization": f"Bearer {os.urandom(32).hex()}"}  # each would be a Redis lookup
                statuses.append((await request(http, method, gw.url + path, headers=headers)).status)
            assert statuses == [401, 401, 429], (group, statuses)

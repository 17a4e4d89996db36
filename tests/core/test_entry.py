"""The transports' one entry (``gateway/callers/entry.py``) on the real stores: authenticate once, hold the
credential (a revocation ends the holder, a re-check refuses an expired session), and bill through the
session handle as the HTTP path bills (the same stages after auth, the same refund rule)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import asyncpg
import orjson
import pytest

from gateway.app.features import method_registry
from gateway.app.settings import Settings
from gateway.auth.services import AuthServices
from gateway.auth.stage import AuthStage
from gateway.callers.entry import Entry, EntrySession
from gateway.core.credentials import Credentials
from gateway.core.errors import ProxyError, ReplyStyle
from gateway.core.identity import Identity
from gateway.core.methods import PriceTable
from gateway.credits.meter import Meter
from gateway.credits.stage import CreditHeaders, MeteringStage
from gateway.limits.rules import Limiter
from gateway.node.http import UpstreamUnavailable
from gateway.pipeline.stages import Call, Handler, Reply, Wire, compose, error_boundary
from gateway.rpc.forward import Forwarder, ParseStage
from gateway.storage.connections import Connections
from gateway.storage.ledger import balance
from tests.credits.helpers import ScriptedNode, fund, new_pubkey
from tests.support import service_key_settings

TOKEN_TTL_MS = 400


@dataclass
class Stack:
    services: AuthServices
    meter: Meter
    node: ScriptedNode
    entry: Entry
    http: Handler  # POST /'s stages, for comparison: error_boundary, auth, then the entry's stages
    pool: asyncpg.Pool
    ended: list[str] = field(default_factory=list)

    def end(self, reason: str) -> None:
        self.ended.append(reason)

    async def customer(self, credits: int) -> tuple[str, str]:
        """A funded account and its API key: (pubkey, key)."""
        assert self.services.api_keys is not None
        pubkey = new_pubkey()
        key = await self.services.api_keys.rotate(pubkey, None)
        if credits:
            await fund(self.pool, pubkey, credits)
        return pubkey, key


@pytest.fixture
async def stack(tmp_path: Path, database_url: str, redis_url: str) -> AsyncIterator[Stack]:
    settings = Settings(**service_key_settings(tmp_path), home=tmp_path, database_url=database_url, redis_url=redis_url)
    conn = await Connections.open(database_url, redis_url, pool_size=4)
    assert conn.db is not None
    services = AuthServices(settings, api_key_secret=b"k" * 32, token_ttl_ms=TOKEN_TTL_MS)
    await services.start(conn)
    meter = Meter(conn.db)
    node = ScriptedNode()
    metering = MeteringStage(meter, Limiter(100, 8))
    after_auth = [CreditHeaders(metering), ParseStage(method_registry(), PriceTable.default()), metering]
    forwarder = Forwarder(node)
    entry = Entry(services, meter, compose([error_boundary, *after_auth], forwarder))
    http = compose([error_boundary, AuthStage(services), *after_auth], forwarder)
    try:
        yield Stack(services, meter, node, entry, http, conn.db)
    finally:
        await meter.stop()
        await services.stop()
        await conn.close()


def opening(credentials: Credentials, wire: Wire = Wire.WEBSOCKET) -> Call:
    call = Call("GET", "/ws", {}, {}, b"", credentials=credentials, wire=wire)
    call.style = ReplyStyle.REST
    return call


def rpc_call(method: str, path: str = "/ws") -> Call:
    body = orjson.dumps({"jsonrpc": "2.0", "id": 1, "method": method, "params": []})
    return Call("POST", path, {}, {}, body, wire=Wire.WEBSOCKET, style=ReplyStyle.JSONRPC)


async def until(condition: Callable[[], bool], timeout_s: float = 5.0) -> None:
    for _ in range(int(timeout_s / 0.02)):
        if condition():
            return
        await asyncio.sleep(0.02)
    raise AssertionError("condition not reached")


async def usage(pool: asyncpg.Pool, pubkey: str) -> list[tuple[str, bool]]:
    rows = await pool.fetch("SELECT method, refunded FROM usage_history WHERE pubkey = $1 ORDER BY id", pubkey)
    return [(r["method"], r["refunded"]) for r in rows]


async def test_a_connection_is_authenticated_once_and_its_calls_run_as_it(stack: Stack) -> None:
    pubkey, _ = await stack.customer(100)
    assert stack.services.sessions is not None
    token = await stack.services.sessions.issue_token(pubkey)
    authenticator = stack.services.authenticator
    calls = 0
    authenticate = authenticator.authenticate

    async def counted(call: Call, **options: Any) -> Identity:
        nonlocal calls
        calls += 1
        return await authenticate(call, **options)

    authenticator.authenticate = counted  # type: ignore[method-assign]
    call = opening(Credentials(authorization=f"Bearer {token}"))
    session = await stack.entry.open(call, stack.end)
    assert call.identity == session.identity == Identity(pubkey, "session")
    for _ in range(3):
        reply = await session.rpc(rpc_call("getSlot"))
        assert reply.status == 200 and orjson.loads(reply.body)["result"] == 1
        assert reply.headers["X-Credits-Remaining"]
    admission = await session.reserve(2)
    assert admission.ok
    session.complete(admission, "notification", "ws-1")
    assert calls == 1  # the connection's calls and charges never authenticate again
    assert stack.services.revocations.held == 1
    session.close()
    session.close()  # idempotent
    assert stack.services.revocations.held == 0 and stack.ended == []


async def test_a_refusal_is_raised_by_open_and_rendered_by_admit(stack: Stack) -> None:
    with pytest.raises(ProxyError) as refused:
        await stack.entry.open(opening(Credentials()))
    assert refused.value.status == 402
    reply, session = await stack.entry.admit(opening(Credentials(api_key="not-a-key")))
    assert session is None and reply.status == 401
    assert orjson.loads(reply.body)["error"]["message"] and reply.headers["X-Request-Id"]
    assert stack.services.revocations.held == 0
    _, key = await stack.customer(10)
    reply, session = await stack.entry.admit(opening(Credentials(api_key=key)))
    assert session is not None and reply.status == 200 and reply.headers["X-Request-Id"]
    session.close()


async def test_a_revoked_key_ends_its_holders_and_a_late_binding_hears_it(stack: Stack) -> None:
    pubkey, key = await stack.customer(10)
    session = await stack.entry.open(opening(Credentials(api_key=key)), stack.end)
    late = await stack.entry.open(opening(Credentials(token=key), Wire.GRPC))  # its end bound later
    assert stack.services.revocations.held == 2
    assert stack.services.api_keys is not None
    await stack.services.api_keys.rotate(pubkey, None)
    await until(lambda: stack.ended != [])
    assert "revoked" in stack.ended[0] and session.revoked == stack.ended[0]
    assert stack.services.revocations.held == 0
    heard: list[str] = []
    late.bind(heard.append)  # revoked before it was bound: told at once
    assert heard == [stack.ended[0]]
    assert not await session.recheck()
    session.close()
    late.close()


async def test_a_recheck_refuses_an_expired_session(stack: Stack) -> None:
    pubkey, _ = await stack.customer(10)
    assert stack.services.sessions is not None
    token = await stack.services.sessions.issue_token(pubkey)
    session = await stack.entry.open(opening(Credentials(authorization=f"Bearer {token}")), stack.end)
    assert await session.recheck()
    await asyncio.sleep(TOKEN_TTL_MS / 1000 + 0.2)
    assert not await session.recheck()
    assert len(stack.ended) == 1 and "logged out or expired" in stack.ended[0]
    assert stack.services.revocations.held == 0
    session.close()


async def test_a_wallet_holds_nothing_and_its_recheck_passes(stack: Stack) -> None:
    pubkey, _ = await stack.customer(10)
    session = EntrySession(stack.entry, Identity(pubkey, "wallet"), Credentials(), None)
    assert await session.recheck()
    session.close()


async def test_billing_through_the_session_charges_and_refunds_like_http(stack: Stack) -> None:
    pubkey, key = await stack.customer(1_000)
    session = await stack.entry.open(opening(Credentials(api_key=key)), stack.end)

    async def both(method: str) -> tuple[Reply, Reply]:
        through_entry = await session.rpc(rpc_call(method))
        http = Call("POST", "/", {"x-api-key": key}, {}, rpc_call(method).body, credentials=Credentials(api_key=key))
        http.style = ReplyStyle.JSONRPC
        return through_entry, await stack.http(http)

    for reply in await both("getSlot"):  # answered: charged
        assert reply.status == 200
    stack.node.fail = UpstreamUnavailable("refused", sent=False)  # never reached the node: refunded
    entry_reply, http_reply = await both("getBlock")
    assert entry_reply.status == http_reply.status == 502
    assert orjson.loads(entry_reply.body)["error"] == orjson.loads(http_reply.body)["error"]
    stack.node.fail = None
    entry_reply, http_reply = await both("sendTransaction")  # no transaction: refused free, no record at all
    assert entry_reply.status == http_reply.status
    assert orjson.loads(entry_reply.body)["error"]["code"] == orjson.loads(http_reply.body)["error"]["code"] == -32602

    charged = await session.reserve(5)  # self-billed units: charged, or refunded
    session.complete(charged, "notification", "ws-1")
    refunded = await session.reserve(7)
    session.complete(refunded, "grpc:Ping", "grpc-1", refunded=True)
    short = await session.reserve(10_000)
    assert not short.ok
    await stack.meter.flush()

    rows = await usage(stack.pool, pubkey)
    assert rows == [
        ("getSlot", False),
        ("getSlot", False),
        ("getBlock", True),
        ("getBlock", True),
        ("notification", False),
        ("grpc:Ping", True),
    ]
    assert await balance(stack.pool, pubkey) == 1_000 - 2 - 5
    session.close()

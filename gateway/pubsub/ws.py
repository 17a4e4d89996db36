"""The WebSocket transport: ``/ws``, the node's PubSub methods and the signals stream, metered.

The upgrade is always accepted (echoing only the JSON-RPC subprotocol entry, never ``auth.<key>``),
then authenticated through the transports' one entry (:mod:`gateway.callers.entry`: JSON-RPC's authentication,
the credential held for revocation, the stages after auth for the socket's calls); a refusal closes the
socket with docs/api.md's code and the error's message as the reason, so a client can tell why (an HTTP
403 at the handshake would tell it nothing): 1008 for an invalid or expired session token, 4001 for any
other credential failure (a bad or revoked key, none at all, no account), 4002 below the minimum
balance, 1013 while the service is starting. The session (:mod:`gateway.pubsub.session`) does the rest;
this module only moves frames between it and ASGI.

Sockets are capped (:mod:`gateway.pubsub.caps`): past the replica's cap or the client address's, the
upgrade itself is refused (503 or 429 with ``Retry-After``, before any authentication); past the
account's, the socket closes 4003 once authenticated. A socket opened with an API key or a session
token closes 1008 as soon as that credential is revoked, wherever it was revoked
(:mod:`gateway.auth.revocations`).

Protocol pings are the server's (uvicorn's ``ws_ping_interval``/``ws_ping_timeout``, set to
docs/api.md's 25 s where this gateway configures the server: :data:`UVICORN_WS_OPTIONS`); a client that
misses its pong is dropped by the server, which ends the session here and releases its
subscriptions upstream. So is the message limit: a frame past 64 KiB, compressed or not, closes 1009
in the server before it reaches the session.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
from dataclasses import replace

import orjson
from starlette.responses import Response
from starlette.types import Receive, Scope, Send
from starlette.websockets import WebSocket, WebSocketDisconnect

from gateway.access.rules import ACCESS_DENIED, ACCESS_DENIED_CLOSE
from gateway.app.replica import GatewayApp
from gateway.callers.entry import EntrySession
from gateway.core.credentials import websocket_credentials
from gateway.core.errors import ProxyError, ReplyStyle, address_rate_limited, service_unavailable
from gateway.core.subscriptions import Close, Limits
from gateway.limits.addresses import FORWARDED_FOR
from gateway.pipeline.stages import Call, Reply, Wire
from gateway.pubsub.caps import Refusal, SocketCaps
from gateway.pubsub.session import Frames, SessionDeps, SubscriptionTally, WsSession
from gateway.pubsub.uvicorn_protocol import SEND_FRAMES, FramesWebSocketProtocol
from gateway.storage.errors import StoreUnavailable
from gateway.storage.seats import Seat

log = logging.getLogger(__name__)

WS_PATH = "/ws"
#: uvicorn's WebSocket settings (tests and ``gateway.runtime.ingress``): docs/api.md's 25 s ping, and a
#: message limit of what the gateway serves (64 KiB) instead of uvicorn's 16 MiB. websockets enforces it
#: on the frame header and while inflating (permessage-deflate stops at the limit, never inflating a
#: bomb whole) and closes the socket 1009.
#: ``ws``: uvicorn's own protocol, plus the message that writes several frames at once
#: (:mod:`gateway.pubsub.uvicorn_protocol`).
UVICORN_WS_OPTIONS: dict[str, object] = {
    "ws": FramesWebSocketProtocol,
    "ws_ping_interval": Limits.ping_interval_s,
    "ws_ping_timeout": Limits.pong_timeout_s,
    "ws_max_size": Limits.max_message_bytes,
    "ws_per_message_deflate": True,
}
#: A close frame's reason is at most 123 bytes.
MAX_REASON_BYTES = 123
#: Retry-After of an upgrade refused for want of room: sockets are long-lived, room frees up slowly.
FULL_RETRY_S = 30
#: A writer takes at most this many queued frames at once (one socket write, one charge), and lets
#: the others run after a full batch. Taking paid notifications from a lease that covers them and
#: writing to a socket with room never suspend, so a writer with a backlog would send it all in one
#: go: past saturation the writers that resumed first drained theirs and spent the lease while the
#: rest waited for the next one, and some subscribers got nothing for seconds (bench.ws_fanout's
#: spread per subscriber). A yield after every frame cost 60% of the deliveries.
BATCH_FRAMES = 16


class WsTransport:
    """One replica's ``/ws``: an ASGI app, the Starlette ``WebSocketRoute``'s endpoint.

    Frames go out through the ASGI ``send`` itself, not starlette's ``WebSocket.send_text``: its state
    checks and wrapper were 14% of a saturated fan-out's samples (bench/README.md, ``bench.ws_fanout``);
    several at once where the server offers it (:data:`SEND_FRAMES`). The handshake, the reads and the
    close go through the ``WebSocket``."""

    def __init__(self, gw: GatewayApp) -> None:
        self.gw = gw
        self.limits = gw.ws_limits
        self.caps = SocketCaps(
            gw.settings.ws_max_connections,
            self.limits.max_connections_per_address,
            self.limits.max_connections_per_account,
            gw.settings.share_replicas,
            gw.seats,
        )
        self.tally = SubscriptionTally()
        self.frames = Frames()

    def deps(self) -> SessionDeps:
        gw = self.gw  # the signal feed exists once the app has started
        return SessionDeps(gw.pubsub, gw.signal_feed, self.limits, self.tally, self.frames)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        await self.serve(WebSocket(scope, receive, send), send)

    async def serve(self, websocket: WebSocket, send: Send) -> None:
        headers = {k.lower(): v for k, v in websocket.headers.items()}
        peer = websocket.client.host if websocket.client else None
        address = self.gw.ip_limits.client(peer, headers.get(FORWARDED_FOR))
        try:
            opened = await self.caps.open(address)
        except StoreUnavailable:
            await _deny(websocket, service_unavailable("open WebSockets cannot be counted right now; retry", 1))
            return
        if isinstance(opened, Refusal):
            await _deny(websocket, self._full(opened))
            return
        try:
            await self._admit(websocket, send, headers, peer)
        finally:
            await self.caps.close(opened)

    def _full(self, refusal: Refusal) -> ProxyError:
        if refusal is Refusal.REPLICA_FULL:
            message = f"no room for another WebSocket here ({self.caps.per_replica} open); retry"
            return service_unavailable(message, FULL_RETRY_S)
        message = f"too many open WebSockets from this address ({self.caps.per_address}); close one first"
        return replace(address_rate_limited(FULL_RETRY_S), message=message)

    async def _admit(self, websocket: WebSocket, send: Send, headers: dict[str, str], peer: str | None) -> None:
        query = dict(websocket.query_params)
        upgrade = websocket_credentials(headers, query)
        await websocket.accept(subprotocol=upgrade.subprotocol)
        call = Call("GET", WS_PATH, headers, query, b"", credentials=upgrade.credentials, client=peer)
        call.wire, call.style = Wire.WEBSOCKET, ReplyStyle.REST
        reply, entered = await self.gw.entry.admit(call)
        if entered is None:
            code = self._refusal_code(call, reply)
            reason = _message(reply) if code != ACCESS_DENIED_CLOSE else f"{ACCESS_DENIED}: {_message(reply)}"
            await _close(websocket, code, reason)
            return
        try:
            seat = await self._join(websocket, entered.pubkey)
            if seat is None:
                return
            try:
                await self._session(websocket, send, entered, peer)
            finally:
                await self.caps.seats.give(seat)
        finally:
            entered.close()

    async def _join(self, websocket: WebSocket, pubkey: str) -> Seat | None:
        """The account's seat for this socket, or the socket closed: 4003 at the account's cap, 1013
        when the seats cannot be counted (never served uncounted)."""
        try:
            seat = await self.caps.join(pubkey)
        except StoreUnavailable:
            await _close(websocket, Close.TRY_AGAIN_LATER, "open WebSockets cannot be counted right now; retry")
            return None
        if seat is None:
            reason = f"connection limit reached: {self.caps.per_account} open WebSockets per account"
            await _close(websocket, Close.RATE_LIMITED, reason)
        return seat

    async def _session(self, websocket: WebSocket, send: Send, entered: EntrySession, peer: str | None) -> None:
        """Serve an admitted socket until it ends; its credential's revocation closes it 1008."""
        await entered.prepare()
        remaining = entered.remaining() or 0
        if remaining < self.limits.min_balance:
            reason = f"insufficient credits: {remaining} (minimum {self.limits.min_balance})"
            await _close(websocket, Close.INSUFFICIENT_CREDITS, reason)
            return
        session = WsSession(self.deps(), entered, peer, f"ws-{os.urandom(8).hex()}")
        entered.bind(lambda why: session.close(_revoked_code(why), why))
        try:
            await self._serve(websocket, send, session)
        finally:
            entered.bind(None)
            await session.release()

    def _refusal_code(self, call: Call, reply: Reply) -> int:
        if reply.status == 503:
            return Close.TRY_AGAIN_LATER
        if reply.status == 429:  # too many failed authentications from this address (docs/api.md, Limits)
            return Close.RATE_LIMITED
        if reply.status == 403 and _message_code(reply) == ACCESS_DENIED:  # the account's access rules
            return ACCESS_DENIED_CLOSE
        strategy = self.gw.auth.authenticator.select(call.credentials)
        if reply.status == 401 and strategy is not None and strategy.kind == "session":
            return Close.POLICY_VIOLATION
        return Close.AUTH_FAILED

    async def _serve(self, websocket: WebSocket, send: Send, session: WsSession) -> None:
        reader = asyncio.create_task(self._read(websocket, session))
        together = SEND_FRAMES in (websocket.scope.get("extensions") or {})
        writer = asyncio.create_task(self._write(send, session, together))
        ticker = asyncio.create_task(self._tick(session))
        try:
            await asyncio.wait({reader, writer}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for task in (reader, writer, ticker):
                task.cancel()
            await asyncio.gather(reader, writer, ticker, return_exceptions=True)
        if not reader.cancelled() and reader.exception() is None and reader.result():
            return  # the client went away: nothing to close
        await _close(websocket, session.close_code or Close.NORMAL, session.close_reason)

    @staticmethod
    async def _read(websocket: WebSocket, session: WsSession) -> bool:
        """Feed the session the client's frames; True once the client disconnected."""
        while True:
            message = await websocket.receive()
            if message["type"] == "websocket.disconnect":
                return True
            frame = message.get("text")
            if frame is None:
                frame = message.get("bytes") or b""
            await session.on_frame(frame)
            if session.close_code is not None:
                await asyncio.Event().wait()  # the writer sends what is queued, then ends the connection

    @staticmethod
    async def _write(send: Send, session: WsSession, together: bool) -> None:
        """Write the session's frames: with ``together`` (the server offers :data:`SEND_FRAMES`) each
        batch in one message, so one socket write; else one ``websocket.send`` each."""
        with contextlib.suppress(OSError):  # the client went away (uvicorn's ClientDisconnected)
            while (batch := await session.next_batch(BATCH_FRAMES)) is not None:
                session.writing = True  # seen by others only while this write waits for the client
                try:
                    if together:
                        await send({"type": SEND_FRAMES, "texts": batch})
                    else:
                        for body in batch:
                            await send({"type": "websocket.send", "text": body.decode()})
                except OSError:  # the client's close came first: not written (release() refunds the rest)
                    session.written(False)
                    return
                session.written(True)
                session.writing = False
                if len(batch) >= BATCH_FRAMES:
                    await asyncio.sleep(0)

    async def _tick(self, session: WsSession) -> None:
        """Look at the balance now and then: credits spent elsewhere also count."""
        while True:
            await asyncio.sleep(self.limits.balance_check_s)
            session.check_balance()


def _revoked_code(reason: str) -> int:
    """1008 for a revoked credential or a suspended account, 4004 for a connection the account's access
    rules no longer allow (docs/api.md, "Access rules")."""
    return ACCESS_DENIED_CLOSE if reason.startswith(ACCESS_DENIED) else Close.POLICY_VIOLATION


def _message_code(reply: Reply) -> str | None:
    """The refusal's constant (the REST error shape's ``code``)."""
    try:
        body = orjson.loads(reply.body)
    except orjson.JSONDecodeError:
        return None
    error = body.get("error") if isinstance(body, dict) else None
    code = error.get("code") if isinstance(error, dict) else None
    return code if isinstance(code, str) else None


def _message(reply: Reply) -> str:
    """The refusal's message, for the close reason (the body is JSON-RPC's or the REST error shape)."""
    try:
        body = orjson.loads(reply.body)
    except orjson.JSONDecodeError:
        return "refused"
    error = body.get("error") if isinstance(body, dict) else None
    message = error.get("message") if isinstance(error, dict) else None
    return message if isinstance(message, str) else "refused"


async def _deny(websocket: WebSocket, refusal: ProxyError) -> None:
    """Refuse the upgrade with an HTTP answer (a server without ASGI's denial extension sends 403)."""
    body = orjson.dumps(refusal.http_body(None))
    response = Response(body, refusal.status, headers=refusal.headers, media_type="application/json")
    try:
        await websocket.send_denial_response(response)
    except RuntimeError:
        await websocket.close(Close.TRY_AGAIN_LATER)


async def _close(websocket: WebSocket, code: int, reason: str) -> None:
    encoded = reason.encode()[:MAX_REASON_BYTES]
    with contextlib.suppress(WebSocketDisconnect, RuntimeError):
        await websocket.close(code, encoded.decode(errors="ignore"))

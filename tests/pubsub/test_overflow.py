"""A socket whose queue of undelivered messages overflows closes 1013 with a reason that says whose fault
it is: the client's, when the writer is stuck on the socket's full buffer; the gateway's, when it is not.

The session is the gateway's own, admitted by its entry with an API key and fed by the node's real slot
notifications through the replica's shared PubSub; only the socket is stood in for, by an ASGI ``send``
that blocks as uvicorn's does when a client stops reading (making a real client's kernel buffers and the
server's fill up takes megabytes and minutes).
"""

from __future__ import annotations

import asyncio
from dataclasses import replace
from typing import Any

import orjson

from gateway.callers.entry import EntrySession
from gateway.core.credentials import websocket_credentials
from gateway.core.subscriptions import Close
from gateway.pipeline.stages import Call, Wire
from gateway.pubsub.session import OVERFLOW_REASONS, WsSession
from gateway.pubsub.ws import WS_PATH, WsTransport
from tests.sending.helpers import Caller
from tests.support import RunningGateway

MAX_QUEUED = 5


async def session_of(
    gateway: RunningGateway, caller: Caller, max_queued: int = MAX_QUEUED, max_queued_bytes: int = 2**30
) -> tuple[WsSession, EntrySession]:
    headers = {k.lower(): v for k, v in caller.headers.items()}
    call = Call("GET", WS_PATH, headers, {}, b"", credentials=websocket_credentials(headers, {}).credentials)
    call.wire = Wire.WEBSOCKET
    reply, entered = await gateway.app.entry.admit(call)
    assert entered is not None, reply
    await entered.prepare()
    deps = WsTransport(gateway.app).deps()
    deps = replace(deps, limits=replace(deps.limits, max_queued=max_queued, max_queued_bytes=max_queued_bytes))
    session = WsSession(deps, entered, None, "ws-overflow-test")
    await session.on_frame(orjson.dumps({"jsonrpc": "2.0", "id": 1, "method": "slotSubscribe"}))
    return session, entered


async def closed(session: WsSession) -> None:
    """Until the session closes. Polled: its only signal is the end of its message queue, and reading
    that queue here would drain what must pile up."""
    while session.close_code is None:  # noqa: ASYNC110
        await asyncio.sleep(0.05)


async def stalled_reader_closes(session: WsSession, entered: EntrySession, timeout_s: float) -> None:
    """Write ``session``'s messages to a client that reads two (the subscription's answer and a notification)
    and then nothing more, until the session closes (within ``timeout_s``); then give the session back."""
    written: list[Any] = []
    socket_full = asyncio.Event()  # never set: the client reads nothing more

    async def send(message: Any) -> None:
        written.append(message)
        if len(written) > 2:
            await socket_full.wait()

    writer = asyncio.create_task(WsTransport._write(send, session, together=False))
    try:
        await asyncio.wait_for(closed(session), timeout_s)
    finally:
        writer.cancel()
        await session.release()
        entered.close()


async def test_a_client_that_stops_reading_is_told_so(gateway: RunningGateway, caller: Caller) -> None:
    session, entered = await session_of(gateway, caller)
    await stalled_reader_closes(session, entered, 10)
    assert session.close_code == Close.TRY_AGAIN_LATER
    assert session.close_reason == OVERFLOW_REASONS["client"]


async def test_a_gateway_that_falls_behind_says_it_is_its_own_fault(gateway: RunningGateway, caller: Caller) -> None:
    session, entered = await session_of(gateway, caller)  # no writer drains it, and none is stuck on a socket
    try:
        await asyncio.wait_for(closed(session), 10)
    finally:
        await session.release()
        entered.close()
    assert session.close_code == Close.TRY_AGAIN_LATER
    assert session.close_reason == OVERFLOW_REASONS["gateway"]
    assert "reconnect" in session.close_reason


async def test_a_client_that_stops_reading_is_dropped_at_the_byte_bound(
    gateway: RunningGateway, caller: Caller
) -> None:
    """The count bound left as is (10,000): a few slot notifications' bytes past ``max_queued_bytes``
    close the socket, so a client that stops reading cannot pin 10,000 large notifications."""
    session, entered = await session_of(gateway, caller, max_queued=10_000, max_queued_bytes=400)
    await stalled_reader_closes(session, entered, 30)
    assert session.close_code == Close.TRY_AGAIN_LATER
    assert session.close_reason == OVERFLOW_REASONS["client"]
    assert len(session._out) < 10  # the bytes, not the count, closed it

"""Frames past the message limit, through the real uvicorn the gateway configures (its
``UVICORN_WS_OPTIONS``) and the ``websockets`` client: closed 1009 by the server, and a compressed
frame is refused while it is inflated, never inflated whole first."""

from __future__ import annotations

import asyncio
import os
import struct
import zlib
from typing import Any

import aiohttp
import orjson
import pytest
from websockets.asyncio.client import ClientConnection, connect
from websockets.exceptions import ConnectionClosed
from websockets.frames import Opcode
from websockets.utils import apply_mask

from gateway.core.subscriptions import Limits
from tests.sending.helpers import Caller
from tests.support import RunningGateway

MESSAGE_TOO_BIG = 1009
GUARD_S = 30


def compressed_text_frame(payload: bytes) -> bytes:
    """A masked, final text frame with RSV1 set (RFC 7692: compressed), written by hand: websockets'
    own serializer compresses what it is given."""
    mask = os.urandom(4)
    head = struct.pack("!BBQ", 0x80 | 0x40 | Opcode.TEXT, 0x80 | 127, len(payload))
    return head + mask + apply_mask(payload, mask)


def ws_url(gateway: RunningGateway) -> str:
    return gateway.url.replace("http://", "ws://") + "/ws"


async def close_code(ws: ClientConnection) -> int | None:
    """The code the server closed with (answers before it are skipped; the guard: an open socket)."""
    with pytest.raises(ConnectionClosed) as closed:
        async with asyncio.timeout(GUARD_S):
            while True:
                await ws.recv()
    return closed.value.rcvd.code if closed.value.rcvd is not None else None


async def authenticated(gateway: RunningGateway, caller: Caller, **options: Any) -> ClientConnection:
    ws = await connect(ws_url(gateway), additional_headers=caller.headers, **options)
    await ws.send(orjson.dumps({"jsonrpc": "2.0", "id": 1, "method": "getSlot"}))
    assert "result" in orjson.loads(await ws.recv())  # admitted: what follows is the frame limit's doing
    return ws


async def test_a_2_mib_text_frame_closes_the_socket_1009(gateway: RunningGateway, caller: Caller) -> None:
    ws = await authenticated(gateway, caller, compression=None)
    await ws.send("x" * (2 * 1024 * 1024))
    assert await close_code(ws) == MESSAGE_TOO_BIG


async def test_a_message_at_the_limit_is_still_read(gateway: RunningGateway, caller: Caller) -> None:
    ws = await authenticated(gateway, caller, compression=None)
    padded = orjson.dumps({"jsonrpc": "2.0", "id": 2, "method": "getSlot", "pad": ""})
    frame = padded[:-2] + b"x" * (Limits.max_message_bytes - len(padded)) + padded[-2:]
    await ws.send(frame.decode())
    assert orjson.loads(await ws.recv())["id"] == 2
    await ws.close()


async def test_a_compressed_16_mib_frame_closes_the_socket_1009(gateway: RunningGateway, caller: Caller) -> None:
    ws = await authenticated(gateway, caller, compression="deflate")
    await ws.send("x" * (16 * 1024 * 1024))  # about 16 KB on the wire
    assert await close_code(ws) == MESSAGE_TOO_BIG


async def test_a_compressed_frame_is_not_inflated_past_the_limit(gateway: RunningGateway, caller: Caller) -> None:
    """8 MiB of zeros, then bytes that are no deflate data: a server that inflated the frame whole would
    reach them and close 1002 (a protocol error); one that stops at the limit closes 1009 before."""
    ws = await authenticated(gateway, caller, compression="deflate")
    assert ws.protocol.extensions  # permessage-deflate was agreed
    deflate = zlib.compressobj(wbits=-15)
    payload = deflate.compress(b"\0" * (8 * 1024 * 1024)) + deflate.flush(zlib.Z_SYNC_FLUSH)[:-4]
    payload += b"\xff" * 64  # not deflate data
    ws.transport.write(compressed_text_frame(payload))  # as is: the client's compressor would make valid data of it
    assert await close_code(ws) == MESSAGE_TOO_BIG


async def test_the_published_limit_is_the_one_enforced(gateway: RunningGateway, caller: Caller) -> None:
    """``/capabilities`` tells clients the message limit: one byte past it closes 1009, at it is read."""
    async with aiohttp.ClientSession() as http, http.get(gateway.url + "/capabilities") as resp:
        limit = (await resp.json())["limits"]["websocket"]["max_message_bytes"]
    padded = orjson.dumps({"jsonrpc": "2.0", "id": 3, "method": "getSlot", "pad": ""})
    at_limit = padded[:-2] + b"x" * (limit - len(padded)) + padded[-2:]
    ws = await authenticated(gateway, caller, compression=None)
    await ws.send(at_limit.decode())
    assert orjson.loads(await ws.recv())["id"] == 3
    await ws.send(at_limit.decode() + " ")
    assert await close_code(ws) == MESSAGE_TOO_BIG

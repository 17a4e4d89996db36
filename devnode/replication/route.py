"""The leader's side of the wire: `GET /replication` on its RPC server, a WebSocket of binary orjson frames
(devnode/replication/frames.py) from its `ReplicationLog`.

The follower says where it is in the query string: ``genesis`` (the genesis hash it follows), ``log`` and
``seq`` (the log it was reading and the sequence number of the first event it has not applied), each
optional. The leader answers with a hello; then, if the log still holds that sequence number (same log,
same genesis), the events from it, else a base and every logged event; then ``live``; then each event as it
happens. A follower of another genesis gets the hello only and the connection is closed (code 4001).
A follower cut off by the log (too far behind) is closed with code 1008. The leader pings every
`HEARTBEAT_S`; a follower that answers no ping (stopped, gone) is closed by aiohttp.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging

from aiohttp import WSCloseCode, web
from solders.hash import Hash

from devnode.replication.frames import Live, encode
from devnode.replication.log import Reader, ReaderCut, ReplicationLog

log = logging.getLogger(__name__)

PATH = "/replication"
HEARTBEAT_S = 5.0
CLOSE_TIMEOUT_S = 1.0
OTHER_CLUSTER = 4001


class ReplicationRoute:
    """The WebSocket route over a log, and its open connections (closed when the server stops)."""

    def __init__(self, log: ReplicationLog, *, heartbeat_s: float = HEARTBEAT_S) -> None:
        self.log = log
        self.heartbeat_s = heartbeat_s
        self._sockets: set[web.WebSocketResponse] = set()

    def routes(self) -> list[web.RouteDef]:
        return [web.get(PATH, self._handle)]

    async def close_all(self, app: web.Application | None = None) -> None:
        """Close every follower's connection (an `on_shutdown` hook: the server would wait for them)."""
        await asyncio.gather(*(_close(ws, WSCloseCode.GOING_AWAY, b"leader stopping") for ws in list(self._sockets)))

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        try:
            genesis = Hash.from_string(request.query["genesis"]) if "genesis" in request.query else None
            seq = int(request.query["seq"]) if "seq" in request.query else None
        except ValueError as exc:
            raise web.HTTPBadRequest(text=f"bad replication position: {exc}") from exc
        ws = web.WebSocketResponse(heartbeat=self.heartbeat_s, timeout=CLOSE_TIMEOUT_S, compress=False)
        await ws.prepare(request)
        self._sockets.add(ws)
        frames, reader = self.log.open_reader(genesis, request.query.get("log"), seq)
        try:
            for frame in frames:
                await ws.send_bytes(frame)
            if reader is None:
                await _close(ws, OTHER_CLUSTER, b"another cluster")
                return ws
            await self._serve(ws, reader)
        except (ConnectionError, RuntimeError):  # the follower went away mid-send
            pass
        finally:
            self._sockets.discard(ws)
            if reader is not None:
                self.log.close_reader(reader)
        return ws

    async def _serve(self, ws: web.WebSocketResponse, reader: Reader) -> None:
        sender = asyncio.create_task(self._send(ws, reader))
        reader.on_cut = sender.cancel
        receiver = asyncio.create_task(_drain(ws))  # pongs and the close handshake are read here
        try:
            await asyncio.wait({sender, receiver}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for task in (sender, receiver):
                task.cancel()
            await asyncio.gather(sender, receiver, return_exceptions=True)
            if reader.cut:
                await _close(ws, WSCloseCode.POLICY_VIOLATION, b"follower too slow")

    async def _send(self, ws: web.WebSocketResponse, reader: Reader) -> None:
        live = False
        try:
            while True:
                frames = self.log.read(reader)
                for frame in frames:
                    await ws.send_bytes(frame)
                if frames:
                    continue
                if not live:
                    await ws.send_bytes(encode(Live(self.log.chain.slot)))
                    live = True
                await reader.wait()
        except ReaderCut:
            pass


async def _drain(ws: web.WebSocketResponse) -> None:
    async for _ in ws:
        pass


async def _close(ws: web.WebSocketResponse, code: int, message: bytes) -> None:
    """Close within `CLOSE_TIMEOUT_S`; past it (a follower that reads nothing) the transport is dropped."""
    with contextlib.suppress(asyncio.TimeoutError, ConnectionError, RuntimeError):
        await asyncio.wait_for(ws.close(code=code, message=message), CLOSE_TIMEOUT_S)

"""uvicorn's WebSocket protocol with one more ASGI message: several text frames in one socket write.

uvicorn writes each ``websocket.send`` with its own ``transport.write``, and uvloop sends each write
at once (a ``send`` system call per frame). In a saturated ``/ws`` fan-out that system call was half
of the gateway's time (bench/README.md, ``bench.ws_fanout``), where a session's writer usually holds
several frames for its socket at once. ASGI has no message for several frames, so this subclass of
uvicorn's own (websockets' sans-I/O protocol, what uvicorn's ``auto`` picks) adds one:

    {"type": SEND_FRAMES, "texts": [b"...", ...]}   # UTF-8 text frames, written in this order

advertised in the scope's ``extensions`` (``SEND_FRAMES`` in ``scope["extensions"]``) so that an app
under another server falls back to one ``websocket.send`` per frame. Each frame is still framed (and
compressed, with permessage-deflate) by websockets' ``ServerProtocol.send_text``, as uvicorn does; only
the write is shared: the frames' bytes go to the transport in one ``write``. Everything else (the
handshake, pings, the close, the transport's flow control) is uvicorn's, unchanged.

Installed through :data:`gateway.pubsub.ws.UVICORN_WS_OPTIONS` (``ws=``), which the tests, the
benchmark and every Serve replica's uvicorn use.
"""

from __future__ import annotations

from typing import Any

from uvicorn.protocols.utils import ClientDisconnected
from uvicorn.protocols.websockets.websockets_sansio_impl import WebSocketsSansIOProtocol
from websockets.exceptions import InvalidState
from websockets.http11 import Request

#: The ASGI message type (and scope extension) for several text frames in one write.
SEND_FRAMES = "gateway.websocket.send_frames"


class FramesWebSocketProtocol(WebSocketsSansIOProtocol):
    """uvicorn's WebSocket protocol, plus :data:`SEND_FRAMES`."""

    def handle_connect(self, event: Request) -> None:
        super().handle_connect(event)
        scope = getattr(self, "scope", None)  # none when the handshake was refused
        if scope is not None:  # the app's task is created but has not run yet: it sees the extension
            scope["extensions"][SEND_FRAMES] = {}

    async def send(self, message: Any) -> None:
        if message["type"] != SEND_FRAMES:
            await super().send(message)
            return
        await self.writable.wait()  # uvicorn's flow control: wait while the transport's buffer is full
        if self.disconnected:
            raise ClientDisconnected()
        if not self.handshake_complete or self.close_sent or self.initial_response is not None:
            raise RuntimeError(f"Unexpected ASGI message {SEND_FRAMES!r} outside an open WebSocket.")
        try:
            for text in message["texts"]:
                self.conn.send_text(text)
        except InvalidState:
            raise ClientDisconnected() from None
        self.transport.write(b"".join(self.conn.data_to_send()))

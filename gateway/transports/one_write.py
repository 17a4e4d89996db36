"""uvicorn's HTTP protocol, answering a fixed-length response in one write instead of two.

uvicorn writes a response's head (status line and headers) when the app sends ``http.response.start``
and its body when the app sends ``http.response.body``: two ``send()`` system calls, and on loopback two
segments for the peer (HAProxy, or the client in ``ingress_mode = "reuseport"``) to wake up for, for
every JSON-RPC answer of a few hundred bytes. :class:`OneWriteHttp` holds the head of a response that
declares its ``Content-Length`` until the body's first write and writes the two together. A chunked
(streaming) answer's head, and ``100 Continue``, are written at once as before: an event stream's client
sees its headers before the first event, however long that takes.

Hand-written because uvicorn has no such option; it changes nothing of how uvicorn builds the head or
checks the body (its own ``RequestResponseCycle.send`` runs), only when the bytes reach the socket. It
relies on names of uvicorn's: the protocol's ``cycle``, and the cycle's ``transport``, ``on_response``,
``response_started`` and ``chunked_encoding``, which ``tests/transports/test_one_write.py`` holds to the
pinned uvicorn.
"""

from __future__ import annotations

import asyncio
from typing import Any

from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol, RequestResponseCycle

#: A body at least this large is written on its own: joining it to the head would copy it.
JOIN_MAX_BYTES = 64 * 1024


class HeldHead:
    """The transport as one response's cycle sees it: the head of a fixed-length answer is held until the
    body's first write and then written with it, or written alone when the answer ends without one (a
    ``HEAD``) or the connection closes. Every other write goes straight through."""

    __slots__ = ("cycle", "head", "respond", "transport", "written")

    def __init__(self, transport: asyncio.WriteTransport, cycle: RequestResponseCycle) -> None:
        self.transport = transport
        self.cycle = cycle
        self.respond = cycle.on_response  # the protocol's: the next pipelined request, or the keep-alive timer
        self.head: bytes | None = None
        self.written = False  # the head is held or written: what comes after it is body

    def write(self, data: bytes) -> None:
        head = self.head
        if head is not None:
            self.head = None
            if len(data) < JOIN_MAX_BYTES:
                self.transport.write(head + data)
                return
            self.transport.write(head)
        elif not self.written and self.cycle.response_started:  # the head (a 100 Continue comes before it)
            self.written = True
            if self.cycle.chunked_encoding is False:  # a Content-Length: its body follows in the same send()s
                self.head = data
                return
        self.transport.write(data)

    def close(self) -> None:
        self.flush()
        self.transport.close()

    def flush(self) -> None:
        """Write a held head: the answer ended without a body write (a ``HEAD``), or the connection closes."""
        if self.head is not None:
            head, self.head = self.head, None
            self.transport.write(head)

    def responded(self) -> None:
        """The cycle's ``on_response``: its answer is complete."""
        self.flush()
        self.respond()

    def is_closing(self) -> bool:
        return self.transport.is_closing()

    def __getattr__(self, name: str) -> Any:  # anything else uvicorn may ask a transport: the real one's
        return getattr(self.transport, name)


class OneWriteHttp(HttpToolsProtocol):
    """uvicorn's httptools protocol whose every request's cycle writes through a :class:`HeldHead`."""

    def on_headers_complete(self) -> None:
        previous = self.cycle
        super().on_headers_complete()
        cycle = self.cycle
        if cycle is not None and cycle is not previous:  # a new request (an upgrade makes none)
            held = HeldHead(cycle.transport, cycle)
            cycle.transport = held  # type: ignore[assignment]
            cycle.on_response = held.responded

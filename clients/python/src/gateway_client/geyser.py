"""The gateway's Yellowstone gRPC ``Subscribe`` stream, resumed with ``from_slot`` (extra ``grpc``).

A :class:`GeyserStream` is one ``Subscribe`` call at a time, authenticated with ``x-token`` (an API key
or a session token). When the call ends with a status another attempt may not have (``UNAVAILABLE``:
the node pool or a store was away, a gRPC server restarted; ``INTERNAL``, ``UNKNOWN``, ``CANCELLED`` by
the network) it subscribes again after a backoff with jitter, with the same request and ``from_slot``
set to the highest slot among the updates it delivered (docs/api.md, Replay: not ``+ 1``, since the rest
of that slot may not have arrived). The replay sends that slot's updates again from its first one; they
are dropped here (transactions and statuses by signature, accounts by ``(pubkey, write_version)``,
slots by ``(slot, status)``, block metas by slot), so the consumer gets each update once, none missing,
as long as the server's replay log still holds the slot (else the call ends ``OUT_OF_RANGE``, raised).

Any other status ends the iteration with the :class:`grpc.aio.AioRpcError` (``UNAUTHENTICATED``,
``RESOURCE_EXHAUSTED``, ``PERMISSION_DENIED``, ``INVALID_ARGUMENT``, ``OUT_OF_RANGE``, ...): another
attempt would be refused alike. ``max_reconnects`` failed attempts in a row end it with the last error.

The channel is TLS (the system's CAs, or ``credentials``) unless the target is on this machine (a loopback
address, ``localhost``, a Unix socket) or the caller asks for plaintext by name (``plaintext=True``): the
``x-token`` is an API key, never sent in clear over a network by default.

The messages are this package's copy of the generated modules (``gateway_client.geyser.pb2``), the same
as any Yellowstone client generates from the public .proto files.

Example:
    >>> request = pb2.SubscribeRequest(slots={"s": pb2.SubscribeRequestFilterSlots()})  # doctest: +SKIP
    >>> async with GeyserStream("127.0.0.1:10000", api_key, request) as stream:  # doctest: +SKIP
    ...     async for update in stream:
    ...         print(update.WhichOneof("update_oneof"), slot_of(update))
"""

from __future__ import annotations

import asyncio
import ipaddress
import logging
from collections import OrderedDict
from collections.abc import Hashable
from dataclasses import dataclass
from typing import Any, Final

import grpc

from gateway_client._geyser import geyser_pb2 as pb2
from gateway_client._geyser import geyser_pb2_grpc as pb2_grpc
from gateway_client.signal_parts import Backoff

__all__ = ["RESUMABLE", "GeyserOptions", "GeyserStream", "is_local_target", "pb2", "pb2_grpc", "slot_of", "update_key"]

log = logging.getLogger(__name__)

#: Statuses after which the stream subscribes again (the rest are the caller's: raised).
RESUMABLE: Final = frozenset(
    {grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.INTERNAL, grpc.StatusCode.UNKNOWN, grpc.StatusCode.CANCELLED}
)


@dataclass(frozen=True)
class GeyserOptions:
    """Bounds and timings of a :class:`GeyserStream`."""

    max_reconnects: int = 10  # failed attempts in a row before the last error is raised
    first_backoff_s: float = 0.5
    max_backoff_s: float = 30.0
    dedup_slots: int = 64  # keys of updates this many slots below the highest are forgotten
    dedup_window: int = 100_000  # and at most this many keys are kept


def is_local_target(target: str) -> bool:
    """Whether a gRPC ``target`` is on this machine: a loopback address or ``localhost`` (``host:port``,
    ``[::1]:port``, gRPC's ``dns:``, ``ipv4:`` and ``ipv6:`` forms) or a Unix socket. Only the text is
    read, never DNS: a name that resolves to loopback is not taken as local."""
    text = target.strip()
    if text.startswith(("unix:", "unix-abstract:")):
        return True
    for prefix in ("dns:///", "dns:", "ipv4:", "ipv6:"):
        if text.startswith(prefix):
            text = text[len(prefix) :]
            break
    if "/" in text or "," in text:  # dns://authority/host, or a list of addresses: not one local host
        return False
    if text.startswith("["):
        host = text[1 : text.find("]")] if "]" in text else text
    elif text.count(":") == 1:
        host = text.rsplit(":", 1)[0]
    else:
        host = text  # no port, or a bare IPv6 address
    host = host.lower().rstrip(".")
    if host == "localhost" or host.endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def slot_of(update: Any) -> int | None:
    """The slot an update belongs to; None for a ping or a pong."""
    kind = update.WhichOneof("update_oneof")
    if kind in (None, "ping", "pong"):
        return None
    return int(getattr(update, kind).slot)


def update_key(update: Any) -> Hashable | None:
    """What makes an update itself, as docs/api.md's Replay says to deduplicate; None: never a repeat."""
    kind = update.WhichOneof("update_oneof")
    if kind == "transaction":
        return kind, bytes(update.transaction.transaction.signature)
    if kind == "transaction_status":
        return kind, bytes(update.transaction_status.signature)
    if kind == "account":
        return kind, bytes(update.account.account.pubkey), update.account.account.write_version
    if kind == "slot":
        return kind, update.slot.slot, update.slot.status
    if kind in ("block_meta", "block", "block_footer"):
        return kind, getattr(update, kind).slot
    if kind == "entry":
        return kind, update.entry.slot, update.entry.index
    return None  # ping, pong: answers to this connection, never replayed


class GeyserStream:
    """An async iterator of ``SubscribeUpdate`` that survives restarts (module docstring).

    Args:
        target: the gateway's gRPC address, ``host:port``.
        token: an API key or a session token, sent as ``x-token``.
        request: the ``SubscribeRequest`` (filters, commitment); its ``from_slot``, if set, is where the
            first call starts.
        credentials: TLS credentials (``grpc.ssl_channel_credentials(root_certificates=...)`` for a private CA);
            None: TLS with the system's CAs, or plaintext to a target on this machine (:func:`is_local_target`).
        plaintext: True to send the token in clear to any target (a TLS-terminating proxy on the path, a
            test network); asked by name, never assumed for a host elsewhere.
        options: bounds and timings (:class:`GeyserOptions`).

    Attributes:
        last_slot: the highest slot among the updates delivered, None before the first.
        connects: calls that were opened (1, then one more per resumption).
        duplicates: replayed updates dropped.
    """

    def __init__(
        self,
        target: str,
        token: str,
        request: Any,
        *,
        credentials: grpc.ChannelCredentials | None = None,
        plaintext: bool = False,
        options: GeyserOptions | None = None,
    ) -> None:
        if plaintext and credentials is not None:
            raise ValueError("plaintext=True and TLS credentials: give one or the other")
        self.target = target
        self.token = token
        self.options = options or GeyserOptions()
        self.last_slot: int | None = request.from_slot if request.HasField("from_slot") else None
        self.connects = 0
        self.duplicates = 0
        self._request = request
        self._credentials = credentials
        # TLS unless plaintext is asked by name, or the target is this machine and no credentials are given
        self._tls = credentials is not None or not (plaintext or is_local_target(target))
        self._channel: grpc.aio.Channel | None = None
        self._call: Any = None
        self._seen: OrderedDict[Hashable, int] = OrderedDict()  # update key -> its slot
        self._backoff = Backoff(self.options.first_backoff_s, self.options.max_backoff_s)
        self._closed = False

    def __aiter__(self) -> GeyserStream:
        return self

    async def __aenter__(self) -> GeyserStream:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        """Cancel the call and close the channel; iterating then stops."""
        self._closed = True
        call, self._call = self._call, None
        if call is not None:
            call.cancel()
        channel, self._channel = self._channel, None
        if channel is not None:
            await channel.close()

    async def write(self, request: Any) -> None:
        """Replace the filters (a ``SubscribeRequest`` without ``from_slot``; a ping); kept for resumptions."""
        if not request.HasField("ping"):
            self._request = request
        if self._call is not None:
            await self._call.write(request)

    async def __anext__(self) -> Any:
        failures = 0
        while True:
            if self._closed:
                raise StopAsyncIteration
            try:
                if self._call is None:
                    await self._open(failures)
                update = await self._call.read()
            except grpc.aio.AioRpcError as exc:
                self._call = None
                if self._closed:
                    raise StopAsyncIteration from None
                if exc.code() not in RESUMABLE:
                    self._closed = True
                    raise
                failures += 1
                if failures > self.options.max_reconnects:
                    self._closed = True
                    raise
                log.info(
                    "geyser stream: %s (%s); resuming from slot %s", exc.code().name, exc.details(), self.last_slot
                )
                continue
            if update is grpc.aio.EOF:  # the server ended the call without a status: resume likewise
                self._call = None
                failures += 1
                continue
            if self._admit(update):
                self._backoff.reset()
                return update

    def _admit(self, update: Any) -> bool:
        """Whether to deliver ``update``: not one delivered before; remembered, with the highest slot."""
        key = update_key(update)
        slot = slot_of(update)
        if key is not None:
            if key in self._seen:
                self.duplicates += 1
                return False
            self._seen[key] = slot if slot is not None else 0
        if slot is not None and (self.last_slot is None or slot > self.last_slot):
            self.last_slot = slot
            self._forget()
        while len(self._seen) > self.options.dedup_window:
            self._seen.popitem(last=False)
        return True

    def _forget(self) -> None:
        """Drop the keys of slots too old for a replay from ``last_slot`` to repeat (oldest first)."""
        assert self.last_slot is not None
        floor = self.last_slot - self.options.dedup_slots
        while self._seen:
            key, slot = next(iter(self._seen.items()))
            if slot >= floor:
                break
            del self._seen[key]

    async def _open(self, failures: int) -> None:
        if failures or self.connects:  # after a loss: spread the clients of a restart out
            await asyncio.sleep(self._backoff.next_delay())
        if self._channel is None:
            self._channel = (
                grpc.aio.secure_channel(self.target, self._credentials or grpc.ssl_channel_credentials())
                if self._tls
                else grpc.aio.insecure_channel(self.target)
            )
        request = pb2.SubscribeRequest()
        request.CopyFrom(self._request)
        if self.last_slot is not None:
            request.from_slot = self.last_slot  # not + 1: the rest of that slot may not have arrived
        stub = pb2_grpc.GeyserStub(self._channel)
        call = stub.Subscribe(metadata=(("x-token", self.token),))
        await _write_opening(call, request)
        self._call = call  # a refused call raises its status from read()
        self.connects += 1


#: How long a refused opening waits for the server's status to replace grpc's local ``INTERNAL``.
STATUS_WAIT_S: Final = 3.0  # the status is a loop turn away; a loaded machine's turns can take long


async def _write_opening(call: Any, request: Any) -> None:
    """Write the opening request of ``call``; a call the server ends meanwhile keeps the server's status.

    A server that refuses on the metadata alone (a revoked key: ``PERMISSION_DENIED``) can end the call while
    this write is in flight. grpc.aio then fails the write and sets the call's status to a local ``INTERNAL``
    ("Internal error from Core", ``_StreamRequestMixin._write``), and replaces it with the server's status
    when that is delivered, a moment later. Raised as it stands, a refusal would look resumable and be tried
    again. So wait (bounded) for the server's status; the caller's ``read()`` raises whichever stands. When
    the server's status was delivered before the write failed, grpc.aio's ``INTERNAL`` replaces it for good
    (seen in CI on a loaded machine): that one is resumed, as any ``INTERNAL``, and the next attempt is
    refused again with the server's own status unless it meets the same race.
    """
    try:
        await call.write(request)
    except (grpc.aio.AioRpcError, asyncio.InvalidStateError):
        waited = 0.0
        while await call.code() == grpc.StatusCode.INTERNAL and waited < STATUS_WAIT_S:
            await asyncio.sleep(0.01)
            waited += 0.01

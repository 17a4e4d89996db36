"""``GatewayClient.signals``: the signal stream of ``/ws``, each event once across reconnects.

A :class:`SignalStream` is one ``subscribeSignal`` on one connection at a time:

- it connects to ``/ws`` authenticated as its client is (an API key as ``auth.<key>`` in
  ``Sec-WebSocket-Protocol``; else the wallet's session token as ``Authorization: Bearer``), sends
  ``subscribeSignal`` with its filter and yields each ``signalNotification``'s event; websockets
  answers the server's pings;
- after a close that says nothing about the caller (:data:`RECONNECT_CODES`: normal, going away,
  abnormal, internal error, restart, try again later, bad gateway, ...) or a network error it connects
  again after a backoff with jitter, subscribes again and fills the gap from ``GET /signals/recent``
  (from a few slots before the last one it saw), skipping every event it yielded already (same
  signature, kind and mint, among the last ``dedup_window``): the consumer sees each event once;
- a close for the caller ends it with the typed error (:mod:`gateway_client.errors`): 4001
  :class:`AuthFailed`, 1008 :class:`AuthFailed` after one renewal of the session token, 4002
  :class:`InsufficientCredits` (after a ``subscriptionEnded`` notice), 4003 :class:`RateLimited`;
  ``max_reconnects`` failed attempts in a row end it with :class:`ConnectionLost`.

Bounded: at most ``max_queue`` frames wait in the socket while the consumer does not read (then the
socket stops reading; a server whose own queue fills closes 1013, and the gap-fill catches up), at
most ``max_gap_fill`` events per gap-fill, a timeout on connecting, subscribing and each HTTP read.
The gap-fill reaches back as far as the gateway's signal log keeps events (docs/api.md).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections import deque
from typing import Any, Final, Protocol, cast

import aiohttp
import orjson
from websockets.asyncio.client import ClientConnection, connect
from websockets.exceptions import ConnectionClosed, InvalidHandshake, InvalidStatus
from websockets.typing import Subprotocol

from gateway_client.errors import (
    BackendUnavailable,
    ConnectionLost,
    GatewayError,
    InsufficientCredits,
    RateLimited,
    RpcError,
    error_from_answer,
    error_from_close,
)
from gateway_client.signal_parts import (
    KINDS,
    Backoff,
    SeenEvents,
    SignalEvent,
    SignalFilter,
    StreamOptions,
    event_key,
    websocket_url,
)
from gateway_client.signer import WalletSigner

log = logging.getLogger(__name__)

JSONRPC_SUBPROTOCOL: Final = "solana-rpc"
SUBSCRIBE: Final = "subscribeSignal"
NOTIFICATION: Final = "signalNotification"
ENDED: Final = "subscriptionEnded"
#: Close codes after which the stream connects again: 1000 normal (a replica draining), 1001 going
#: away, 1005 no code, 1006 abnormal (no close frame), 1011 internal error, 1012 service restart,
#: 1013 try again later, 1014 bad gateway. Any other code but the caller's own (4001, 1008, 4002,
#: 4003) is a protocol error (1002, 1003, 1007, 1009, ...): another attempt would fail alike.
RECONNECT_CODES: Final = frozenset({1000, 1001, 1005, 1006, 1011, 1012, 1013, 1014})
#: The largest page of ``GET /signals/recent``.
RECENT_PAGE: Final = 1000
#: The close of an invalid or expired session token: the stream signs a new challenge once.
SESSION_CLOSE: Final = 1008
_SUBSCRIBE_ID: Final = 1


class StreamHost(Protocol):
    """What a stream uses of its client (:class:`gateway_client.GatewayClient`)."""

    url: str
    api_key: str | None
    signer: WalletSigner | None

    async def session_token(self, *, renew: bool = False) -> str: ...

    async def recent_signals(
        self,
        *,
        limit: int | None = None,
        kind: str | None = None,
        since_slot: int | None = None,
        before: str | None = None,
    ) -> dict[str, Any]: ...


class _Retry(Exception):
    """A failure another attempt may not have: the network, a restart, an overloaded gateway."""

    def __init__(self, message: str, code: int | None = None) -> None:
        super().__init__(message)
        self.code = code


class SignalStream:
    """An async iterator of :class:`SignalEvent` that survives disconnects (module docstring).

    Made by :meth:`gateway_client.GatewayClient.signals`; close it with :meth:`aclose` or use it as an
    async context manager (the client also closes its streams when it closes).

    Attributes:
        subscription: the current subscription id (``sig_sub_<n>``), None before the first.
        connects: connections that subscribed (1, then one more per reconnect).
        gap_filled: events yielded from ``GET /signals/recent`` rather than the socket.
    """

    def __init__(
        self,
        host: StreamHost,
        wanted: SignalFilter,
        *,
        since_slot: int | None = None,
        options: StreamOptions | None = None,
    ) -> None:
        self.host = host
        self.wanted = wanted
        self.options = options or StreamOptions()
        self.url = websocket_url(host.url)
        self.subscription: str | None = None
        self.connects = 0
        self.gap_filled = 0
        self._since_slot = since_slot
        self._last_slot: int | None = None  # every event up to it was yielded or is in the backlog
        self._seen = SeenEvents(self.options.dedup_window)
        self._backlog: deque[SignalEvent] = deque()
        self._backoff = Backoff(self.options.first_backoff_s, self.options.max_backoff_s)
        self._ws: ClientConnection | None = None
        self._ended: str | None = None  # the reason of a subscriptionEnded notice
        self._renewals = 0  # session-token renewals since the last subscription
        self._closed = False

    def __aiter__(self) -> SignalStream:
        return self

    async def __aenter__(self) -> SignalStream:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        """Close the connection; iterating then stops."""
        self._closed = True
        ws, self._ws = self._ws, None
        if ws is not None:
            await ws.close()

    async def __anext__(self) -> SignalEvent:
        while True:
            if self._closed:
                raise StopAsyncIteration
            if self._backlog:
                return self._backlog.popleft()
            ws = self._ws
            if ws is None:
                await self._open()
                continue
            try:
                event = self._on_frame(await ws.recv())
                if event is None and self._ended is not None:
                    await self._await_close(ws)  # the close usually says why
                    await self._discard(f"subscription ended: {self._ended}")
            except ConnectionClosed as exc:
                self._ws = None
                if self._closed:
                    raise StopAsyncIteration from None
                self._on_lost(exc)
                continue
            if event is not None:
                return event

    # -- frames --------------------------------------------------------------------------------

    def _on_frame(self, frame: str | bytes) -> SignalEvent | None:
        try:
            message = orjson.loads(frame)
        except orjson.JSONDecodeError:
            log.warning("signal stream: a frame that is not JSON: %.80r", frame)
            return None
        params = message.get("params") if isinstance(message, dict) else None
        if not isinstance(params, dict) or params.get("subscription") != self.subscription:
            return None
        if message.get("method") == ENDED:
            self._ended = str(params.get("reason") or "ended by the gateway")
        elif message.get("method") == NOTIFICATION:
            event = params.get("result")
            if isinstance(event, dict) and self._admit(event):
                return cast(SignalEvent, event)
        return None

    def _admit(self, event: dict[str, Any]) -> bool:
        """Whether to yield ``event``: it matches, and was not yielded before."""
        if not self.wanted.matches(event) or not self._seen.first_time(event):
            return False
        slot = event.get("slot")
        if isinstance(slot, int):
            self._advance(slot)
        return True

    def _advance(self, slot: Any) -> None:
        if isinstance(slot, int) and (self._last_slot is None or slot > self._last_slot):
            self._last_slot = slot

    async def _await_close(self, ws: ClientConnection) -> None:
        """After a ``subscriptionEnded``: read until the server closes (raises ConnectionClosed), a
        little while at most."""
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(self.options.close_wait_s):
                while True:
                    await ws.recv()

    async def _discard(self, why: str) -> None:
        """Drop the connection on purpose; the next read connects again."""
        log.info("signal stream: %s; connecting again", why)
        ws, self._ws, self._ended = self._ws, None, None
        if ws is not None:
            await ws.close()

    def _on_lost(self, exc: ConnectionClosed) -> None:
        """The connection closed under the stream: raise the close's error, or let it reconnect."""
        error = self._close_error(exc)
        if error is not None:
            self._closed = True
            raise error from None
        code = exc.rcvd.code if exc.rcvd is not None else None
        log.info("signal stream: connection closed (%s); connecting again", code if code is not None else "no frame")

    def _close_error(self, exc: ConnectionClosed) -> GatewayError | None:
        """The error a close ends the stream with; None to connect again."""
        code, reason = (exc.rcvd.code, exc.rcvd.reason) if exc.rcvd is not None else (None, "")
        ended, self._ended = self._ended, None
        if code == SESSION_CLOSE and self._can_renew():
            self._renewals += 1  # an expired or revoked session: sign a new challenge once
            return None
        error = error_from_close(code, reason)
        if error is not None:
            if ended is not None:
                error.data = {"subscription": self.subscription, "reason": ended}
            return error
        if code is None or code in RECONNECT_CODES:
            return None
        return ConnectionLost(0, code, f"closed {code}: {reason or 'protocol error'}")

    def _can_renew(self) -> bool:
        return self.host.api_key is None and self.host.signer is not None and self._renewals == 0

    # -- connecting ----------------------------------------------------------------------------

    async def _open(self) -> None:
        """Connect, subscribe and fill the gap; retry what another attempt may fix, with backoff."""
        failures = 0
        while True:
            if failures or self.connects:  # after a loss too: spread the clients of a restart out
                await asyncio.sleep(self._backoff.next_delay())
            if self._closed:  # closed by another task meanwhile
                return
            try:
                await self._attempt()
            except _Retry as retry:
                failures += 1
                if failures > self.options.max_reconnects:
                    self._closed = True
                    raise ConnectionLost(0, retry.code, f"{self.url}: {retry} ({failures} attempts)") from retry
                log.info("signal stream: attempt %d failed: %s", failures, retry)
                continue
            except GatewayError:
                self._closed = True
                raise
            self._backoff.reset()
            return

    async def _attempt(self) -> None:
        ws = await self._connect()
        try:
            self.subscription = await self._subscribe(ws)
            self._renewals = 0
            await self._fill_gap()
        except BaseException:
            await ws.close()
            raise
        if self._closed:  # closed by another task while this one connected
            await ws.close()
            return
        self._ws = ws
        self.connects += 1

    async def _connect(self) -> ClientConnection:
        subprotocols = [Subprotocol(JSONRPC_SUBPROTOCOL)]
        headers: dict[str, str] = {}
        try:
            if self.host.api_key is not None:
                subprotocols.insert(0, Subprotocol(f"auth.{self.host.api_key}"))
            elif self.host.signer is not None:
                token = await self.host.session_token(renew=self._renewals > 0)
                headers["Authorization"] = f"Bearer {token}"
            return await connect(
                self.url,
                subprotocols=subprotocols,
                additional_headers=headers,
                open_timeout=self.options.open_timeout_s,
                max_queue=self.options.max_queue,
            )
        except InvalidStatus as exc:  # the upgrade was answered with an HTTP error
            raise _http_failure(exc) from exc
        except (OSError, TimeoutError, InvalidHandshake, aiohttp.ClientError) as exc:
            raise _Retry(f"cannot connect: {type(exc).__name__}: {exc}") from exc
        except (BackendUnavailable, RateLimited) as exc:  # opening the session
            raise _Retry(str(exc), exc.status) from exc

    async def _subscribe(self, ws: ClientConnection) -> str:
        request = {"jsonrpc": "2.0", "id": _SUBSCRIBE_ID, "method": SUBSCRIBE, "params": self.wanted.params()}
        try:
            async with asyncio.timeout(self.options.subscribe_timeout_s):
                await ws.send(orjson.dumps(request).decode())
                while True:
                    answer = orjson.loads(await ws.recv())
                    if isinstance(answer, dict) and answer.get("id") == _SUBSCRIBE_ID:
                        return _subscription(answer)
        except ConnectionClosed as exc:
            error = self._close_error(exc)
            if error is not None:
                raise error from None
            raise _Retry(f"closed while subscribing ({exc})", exc.rcvd.code if exc.rcvd else None) from exc
        except TimeoutError as exc:
            raise _Retry("no answer to subscribeSignal in time") from exc
        except orjson.JSONDecodeError as exc:
            raise _Retry(f"a frame that is not JSON while subscribing: {exc}") from exc

    async def _fill_gap(self) -> None:
        """Queue what the log stored while the stream was away (the first time: learn where it is)."""
        since = self._gap_since()
        try:
            async with asyncio.timeout(self.options.http_timeout_s):
                if since is None:  # the first connection: only where the log is
                    self._advance((await self.host.recent_signals(limit=1)).get("next_since_slot"))
                    return
                events, covered = await self._stored_after(since)
        except (BackendUnavailable, RateLimited) as exc:
            raise _Retry(f"GET /signals/recent: {exc}", exc.status) from exc
        except (OSError, TimeoutError, aiohttp.ClientError) as exc:
            raise _Retry(f"GET /signals/recent: {type(exc).__name__}: {exc}") from exc
        for event in events:
            if self._admit(event):
                self._backlog.append(cast(SignalEvent, event))
                self.gap_filled += 1
        self._advance(covered)

    def _gap_since(self) -> int | None:
        """The ``since_slot`` of this connection's gap-fill, None for none."""
        if self.connects == 0:
            return self._since_slot
        if self._last_slot is None:  # the log was empty when the stream started: all of it is new
            return 0
        return max(0, self._last_slot - self.options.gap_margin_slots)

    async def _stored_after(self, since: int) -> tuple[list[dict[str, Any]], Any]:
        """The stored events after slot ``since``, oldest first (at most the newest ``max_gap_fill``),
        and the first page's ``next_since_slot``: every event up to that slot was stored when it was read."""
        newest_first: list[dict[str, Any]] = []
        covered: Any = None
        before: str | None = None
        limit = self.options.max_gap_fill
        while True:
            page_size = min(RECENT_PAGE, limit - len(newest_first))
            answer = await self.host.recent_signals(
                limit=page_size, kind=self.wanted.kind, since_slot=since, before=before
            )
            page = [e for e in answer.get("events") or [] if isinstance(e, dict)]
            covered = answer.get("next_since_slot") if before is None else covered
            newest_first += page
            if not answer.get("more") or not page:
                break
            if len(newest_first) >= limit:
                log.warning("signal stream: more than %d events to fill the gap; the oldest are skipped", limit)
                break
            before = page[-1].get("id")
            if not isinstance(before, str):
                break
        return [_event(e) for e in reversed(newest_first)], covered


def _event(stored: dict[str, Any]) -> dict[str, Any]:
    """A ``/signals/recent`` entry as the socket delivers it (without the log's ``id``)."""
    return {k: v for k, v in stored.items() if k != "id"}


def _subscription(answer: dict[str, Any]) -> str:
    """``subscribeSignal``'s answer: the subscription id, or the typed error."""
    error = answer.get("error")
    if isinstance(error, dict):
        code, message, data = error.get("code"), str(error.get("message", "")), error.get("data")
        if code == -32010:
            raise InsufficientCredits(402, code, message, None, data)
        raise RpcError(200, code, message, None, data)
    result = answer.get("result")
    if not isinstance(result, str):
        raise RpcError(200, None, f"subscribeSignal answered {answer!r:.200}")
    return result


def _http_failure(exc: InvalidStatus) -> Exception:
    """An HTTP answer to the upgrade: a retry for 5xx and 429, else the typed error."""
    response = exc.response
    try:
        body: Any = orjson.loads(response.body) if response.body else None
    except orjson.JSONDecodeError:
        body = response.body.decode("utf-8", "replace") if response.body else ""
    headers = {k.lower(): v for k, v in response.headers.raw_items()}
    error = error_from_answer(response.status_code, headers, body)
    if error is None or isinstance(error, BackendUnavailable | RateLimited) or response.status_code >= 500:
        return _Retry(f"upgrade answered HTTP {response.status_code}", response.status_code)
    return error


__all__ = [
    "KINDS",
    "RECONNECT_CODES",
    "Backoff",
    "SeenEvents",
    "SignalEvent",
    "SignalFilter",
    "SignalStream",
    "StreamHost",
    "StreamOptions",
    "event_key",
    "websocket_url",
]

"""One replica's connection to the node's PubSub, shared by every client subscription of the replica.

Clients watching the same thing (same method and params, commitment included) share one upstream
subscription: the node sends each notification once, and :class:`UpstreamPubSub` hands its
``result`` (serialized once) to every listener, which re-addresses it to its client's own id. The
connection opens on the first subscription, and when it drops it reconnects with backoff and
re-subscribes every share by itself, so listeners never learn of it (notifications the node would
have sent while it was down are missed, as with any PubSub reconnect; none is delivered twice,
since a new connection's ids are fresh). A share the node ends itself (a signature's final
notification) is dropped here and its listeners are told.

Hand-written on the ``websockets`` client: solana-py's PubSub client subscribes per call and has no
shared subscriptions or re-subscription, which is this module's whole job.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
import random
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import orjson
from websockets.asyncio.client import ClientConnection, connect
from websockets.exceptions import ConnectionClosed, InvalidHandshake, InvalidURI

from gateway import metrics
from gateway.node.wire import tls_context
from gateway.stopping import cancel_and_wait

log = logging.getLogger(__name__)

#: ``listener(result_json, final)``: ``result_json`` is the notification's ``result``, serialized;
#: ``final`` is True when the node ended the subscription with this notification.
Listener = Callable[[bytes, bool], None]
#: ``on_lost(reason)``: the share can no longer be kept (the node refused it on a re-subscribe).
Lost = Callable[[str], None]


class SubscribeError(Exception):
    """The node refused a subscription (its JSON-RPC error), or could not be reached in time."""

    def __init__(self, code: int, message: str, data: Any = None) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.data = data


@dataclass(eq=False)
class _Share:
    key: tuple[str, bytes]
    method: str
    params: list[Any]
    final_when: Callable[[Any], bool]
    listeners: dict[int, tuple[Listener, Lost]] = field(default_factory=dict)
    upstream_id: int | None = None
    ready: asyncio.Future[None] | None = None  # set while the node is being asked


@dataclass(frozen=True)
class Handle:
    """One listener's place in a share (what :meth:`UpstreamPubSub.unsubscribe` takes back)."""

    key: tuple[str, bytes]
    token: int


def signature_final(result: Any) -> bool:
    """A signature subscription ends with its status (a ``receivedSignature`` notice comes before)."""
    value = result.get("value") if isinstance(result, dict) else None
    return isinstance(value, dict)


class UpstreamPubSub:
    """Args:
    url: the node's PubSub URL (``ws://`` or ``wss://``).
    connect_timeout_s: how long a subscribe waits for a connection before failing -32003.
    """

    def __init__(
        self,
        url: str,
        connect_timeout_s: float = 10.0,
        max_backoff_s: float = 5.0,
        ca_file: str | None = None,
        name: str = "pubsub",
    ) -> None:
        """``ca_file``: CAs trusted for a ``wss://`` node beside the system's (``upstream_ca_file``); ``name``:
        the node's name in the pool, which the log says (its URL may hold a provider's key)."""
        self.url = url
        self.name = name
        self._tls = tls_context(ca_file) if url.startswith("wss://") else None
        self.connect_timeout_s = connect_timeout_s
        self.max_backoff_s = max_backoff_s
        self.shares: dict[tuple[str, bytes], _Share] = {}
        self._by_upstream: dict[int, _Share] = {}
        self._tokens = itertools.count(1)
        self._ids = itertools.count(1)
        self._pending: dict[int, asyncio.Future[Any]] = {}
        self._ws: ClientConnection | None = None
        self._connected = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self.connects = 0  # connections made (tests and logs)

    # -- listeners' side ------------------------------------------------------------------

    async def subscribe(
        self, method: str, params: list[Any], listener: Listener, on_lost: Lost, final_when: Callable[[Any], bool]
    ) -> Handle:
        """Join (or open) the share for ``method(params)``; raises :class:`SubscribeError`."""
        key = (method, orjson.dumps(params, option=orjson.OPT_SORT_KEYS))
        share = self.shares.get(key)
        if share is None:
            share = self.shares[key] = _Share(key, method, params, final_when)
            metrics.WS_UPSTREAM_SUBSCRIPTIONS.set(len(self.shares))
        token = next(self._tokens)
        share.listeners[token] = (listener, on_lost)
        try:
            if share.upstream_id is None:
                if share.ready is None:
                    share.ready = asyncio.get_running_loop().create_future()
                    self._open(share)
                await asyncio.wait_for(asyncio.shield(share.ready), self.connect_timeout_s)
        except TimeoutError as exc:
            self._leave(share, token)
            raise SubscribeError(-32003, "the node's PubSub is unavailable; retry shortly") from exc
        except BaseException:
            self._leave(share, token)
            raise
        return Handle(key, token)

    def unsubscribe(self, handle: Handle) -> None:
        """Leave a share; the last listener out ends it at the node."""
        share = self.shares.get(handle.key)
        if share is not None:
            self._leave(share, handle.token)

    def _leave(self, share: _Share, token: int) -> None:
        share.listeners.pop(token, None)
        if share.listeners or self.shares.get(share.key) is not share:
            return
        del self.shares[share.key]
        metrics.WS_UPSTREAM_SUBSCRIPTIONS.set(len(self.shares))
        if share.upstream_id is not None:
            self._by_upstream.pop(share.upstream_id, None)
            unsub = share.method.replace("Subscribe", "Unsubscribe")
            self._fire(unsub, [share.upstream_id])

    # -- the connection ---------------------------------------------------------------------

    def _open(self, share: _Share) -> None:
        if self._task is None:
            self._task = asyncio.create_task(self._run(), name="upstream-pubsub")
        if self._connected.is_set():
            self._spawn(self._subscribe_upstream(share))
        # else: the connection re-subscribes every share without an id as soon as it is up

    def _spawn(self, coro: Any) -> None:
        task = asyncio.create_task(coro)
        task.add_done_callback(_log_failure)

    async def _subscribe_upstream(self, share: _Share) -> None:
        ready = share.ready
        try:
            result = await self._request(share.method, share.params)
        except SubscribeError as exc:
            self._fail(share, exc)
            return
        except (ConnectionClosed, OSError):
            return  # the connection dropped: the reconnect subscribes the share again
        if self.shares.get(share.key) is not share:  # everyone left while the node was asked
            self._fire(share.method.replace("Subscribe", "Unsubscribe"), [result])
            return
        if not isinstance(result, int):
            self._fail(share, SubscribeError(-32603, f"the node answered {share.method} with {result!r}"))
            return
        share.upstream_id = result
        self._by_upstream[result] = share
        share.ready = None
        if ready is not None and not ready.done():
            ready.set_result(None)

    def _fail(self, share: _Share, exc: SubscribeError) -> None:
        """The node refused: waiting joiners get the error; listeners already in are told it is lost."""
        ready, share.ready = share.ready, None
        if self.shares.get(share.key) is share:
            del self.shares[share.key]
            metrics.WS_UPSTREAM_SUBSCRIPTIONS.set(len(self.shares))
        if ready is not None and not ready.done():
            ready.set_exception(exc)
            ready.exception()  # retrieved: joiners that left already must not leave it unobserved
        else:
            for _, on_lost in list(share.listeners.values()):
                on_lost(exc.message)

    async def _request(self, method: str, params: list[Any]) -> Any:
        ws = self._ws
        if ws is None:
            raise ConnectionClosed(None, None)
        request_id = next(self._ids)
        answer = asyncio.get_running_loop().create_future()
        self._pending[request_id] = answer
        try:
            await ws.send(orjson.dumps({"jsonrpc": "2.0", "id": request_id, "method": method, "params": params}))
            return await asyncio.wait_for(answer, self.connect_timeout_s)
        except TimeoutError as exc:
            raise SubscribeError(-32003, f"the node did not answer {method} in time") from exc
        finally:
            self._pending.pop(request_id, None)

    def _fire(self, method: str, params: list[Any]) -> None:
        """Send without waiting for the answer (unsubscribes: nothing to do with it)."""
        ws = self._ws
        if ws is not None:
            request = orjson.dumps({"jsonrpc": "2.0", "id": next(self._ids), "method": method, "params": params})
            self._spawn(_send_quietly(ws, request))

    async def _run(self) -> None:
        backoff = 0.1
        while True:
            try:
                async with connect(
                    self.url, ssl=self._tls, max_size=64 * 2**20, open_timeout=self.connect_timeout_s
                ) as ws:
                    self._ws, backoff = ws, 0.1
                    self.connects += 1
                    self._connected.set()
                    for share in list(self.shares.values()):  # the first connection, or a reconnect
                        share.upstream_id = None
                        self._spawn(self._subscribe_upstream(share))
                    self._by_upstream.clear()
                    async for raw in ws:
                        self._on_message(raw)
            except asyncio.CancelledError:
                raise
            except (OSError, ConnectionClosed, InvalidHandshake, InvalidURI, TimeoutError) as exc:
                log.warning("node PubSub %s: %s; reconnecting in %.1f s", self.name, exc, backoff)
            finally:
                self._ws = None
                self._connected.clear()
                for answer in self._pending.values():
                    if not answer.done():
                        answer.set_exception(ConnectionClosed(None, None))
                        answer.exception()
                self._pending.clear()
            await asyncio.sleep(backoff * (0.5 + random.random()))  # jitter, not a secret
            backoff = min(self.max_backoff_s, backoff * 2)

    def _on_message(self, raw: str | bytes) -> None:
        try:
            message = orjson.loads(raw)
        except orjson.JSONDecodeError:
            log.warning("node PubSub sent a frame that is not JSON")
            return
        if not isinstance(message, dict):
            return
        if "id" in message and message.get("method") is None:
            answer = self._pending.get(message["id"]) if isinstance(message["id"], int) else None
            if answer is not None and not answer.done():
                error = message.get("error")
                if isinstance(error, dict):
                    code, text = error.get("code", -32603), str(error.get("message", "error"))
                    answer.set_exception(SubscribeError(code, text, error.get("data")))
                else:
                    answer.set_result(message.get("result"))
            return
        params = message.get("params")
        if not isinstance(params, dict):
            return
        share = self._by_upstream.get(params.get("subscription"))  # type: ignore[arg-type]
        if share is None:
            return  # a late notification of a share already ended
        result = params.get("result")
        final = share.final_when(result)
        if final:
            self._by_upstream.pop(share.upstream_id, None)  # type: ignore[arg-type]
            self.shares.pop(share.key, None)
        body = orjson.dumps(result)
        for listener, _ in list(share.listeners.values()):
            listener(body, final)

    async def close(self) -> None:
        task, self._task = self._task, None
        await cancel_and_wait(task)


async def _send_quietly(ws: ClientConnection, request: bytes) -> None:
    with contextlib.suppress(ConnectionClosed, OSError):
        await ws.send(request)


def _log_failure(task: asyncio.Task[None]) -> None:
    if not task.cancelled() and task.exception() is not None:
        log.error("node PubSub task failed", exc_info=task.exception())

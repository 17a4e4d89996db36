"""One process's connection to a node's PubSub, shared by every client subscription of the process.

Clients watching the same thing (same method and params, commitment included) share one upstream
subscription: the node sends each notification once, and :class:`UpstreamPubSub` hands its
``result`` (serialized once) to every listener, which re-addresses it to its client's own id. The
connection opens on the first subscription. A share the node ends itself (a signature's final
notification) is dropped here and its listeners are told.

The connection is on one node of the pool serving ``pubsub`` (:mod:`gateway.node.streams`) and moves
to another one when its node drops the connection, hangs (no pong to a ping every ``ping_s`` within
``silence_s``: a stopped node keeps its socket open) or leaves service in the pool's health. It opens
every share again on the new node, and listeners never learn of it: their subscription ids are this
process's own. What keeps the shares whole across the move (:mod:`gateway.node.pubsub_moves`): a
notification the old node already sent is dropped (de-duplicated by slot), a signature whose transaction
landed meanwhile gets its one notification from the new node's ``getSignatureStatuses``, an account that
changed meanwhile gets its current value once. Only when no node serves ``pubsub`` does a share end:
every listener is told the service is unavailable (its client's socket closes 1013) and new subscriptions
are refused -32003 until a node serves again.

Hand-written on the ``websockets`` client: solana-py's PubSub client subscribes per call and has no
shared subscriptions, re-subscription or moves between nodes, which is this module's whole job.
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

from gateway.base import metrics
from gateway.base.stopping import cancel_and_wait
from gateway.core.upstreams import Role, UpstreamNode
from gateway.node.pubsub_moves import Seen, baseline, catch_up
from gateway.node.streams import OneStreamNode, StreamNodes
from gateway.node.wire import tls_context

log = logging.getLogger(__name__)

#: ``listener(result_json, final)``: ``result_json`` is the notification's ``result``, serialized;
#: ``final`` is True when the node ended the subscription with this notification.
Listener = Callable[[bytes, bool], None]
#: ``on_lost(reason, unavailable)``: the share can no longer be kept: the node refused it on a re-subscribe
#: (``unavailable`` False), or no node of the pool serves PubSub (True: the client should come back later).
Lost = Callable[[str, bool], None]
#: Why shares end when no node serves PubSub (their clients' sockets close 1013 with it).
NO_NODE = "no node of the pool serves PubSub now; reconnect and subscribe again shortly"
#: How long closing the connection waits for the node's answer to its close frame before dropping it: a node
#: left because the pool took it out of service may be hung (a stopped one keeps its socket open and answers
#: nothing), and the move waits for the close (websockets' own default is 10 s).
CLOSE_TIMEOUT_S = 1.0


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
    opened: bool = False  # the node took it once: a later subscription of it is a re-subscription
    seen: Seen = field(init=False)

    def __post_init__(self) -> None:
        self.seen = Seen(self.method)


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
    nodes: the nodes the connection may be on (:class:`~gateway.node.streams.PoolStreamNodes`), or one
        node's PubSub URL (``ws://`` or ``wss://``), which it never leaves.
    connect_timeout_s: how long a subscribe waits for a connection before failing -32003.
    ping_s, silence_s: a ping every ``ping_s``; a node that has not answered one within ``silence_s`` is
        left as hung.
    """

    def __init__(
        self,
        nodes: StreamNodes | str,
        connect_timeout_s: float = 10.0,
        max_backoff_s: float = 5.0,
        ca_file: str | None = None,
        name: str = "pubsub",
        ping_s: float = 1.0,
        silence_s: float = 3.0,
    ) -> None:
        """``ca_file``: CAs trusted for a ``wss://`` node beside the system's (``upstream_ca_file``); ``name``:
        the one node's name, which the log says (its URL may hold a provider's key)."""
        if isinstance(nodes, str):
            nodes = OneStreamNode(UpstreamNode(name=name, rpc_url=_http_of(nodes), ws_url=nodes, roles=(Role.PUBSUB,)))
        self.nodes = nodes
        self.node: UpstreamNode | None = None  # the node of the open connection, or of the last one
        self.ca_file = ca_file
        self.connect_timeout_s = connect_timeout_s
        self.max_backoff_s = max_backoff_s
        self.ping_s = ping_s
        self.silence_s = silence_s
        self.shares: dict[tuple[str, bytes], _Share] = {}
        self._by_upstream: dict[int, _Share] = {}
        self._tokens = itertools.count(1)
        self._ids = itertools.count(1)
        self._pending: dict[int, asyncio.Future[Any]] = {}
        self._ws: ClientConnection | None = None
        self._connected = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._background: set[asyncio.Task[None]] = set()
        self.connects = 0  # connections made (tests and logs)
        self.moves = 0  # connections made to another node than the one before

    @property
    def name(self) -> str:
        """The current node's name (never its URL: it may hold a provider's key)."""
        return self.node.name if self.node is not None else "none"

    # -- listeners' side ------------------------------------------------------------------

    async def subscribe(
        self, method: str, params: list[Any], listener: Listener, on_lost: Lost, final_when: Callable[[Any], bool]
    ) -> Handle:
        """Join (or open) the share for ``method(params)``; raises :class:`SubscribeError`."""
        await self.nodes.start()
        if self.nodes.none_serve():
            raise SubscribeError(-32003, NO_NODE)
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
        # else: the connection subscribes every share without an id as soon as it is up

    def _spawn(self, coro: Any) -> None:
        task = asyncio.create_task(coro)
        self._background.add(task)
        task.add_done_callback(self._background.discard)
        task.add_done_callback(_log_failure)

    async def _subscribe_upstream(self, share: _Share) -> None:
        ready = share.ready
        node = self.node
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
        again, share.opened = share.opened, True
        client = self.nodes.client_of(node.name) if node is not None else None
        if client is None:
            return
        try:
            if again:  # what the client missed while no node had its subscription
                missed = await catch_up(share.method, share.params, share.seen, client)
                if missed is not None and self.shares.get(share.key) is share:
                    self._deliver(share, missed)
                    if self.shares.get(share.key) is not share:  # its last: the node would never send one
                        self._fire(share.method.replace("Subscribe", "Unsubscribe"), [result])
            elif share.method == "accountSubscribe" and self.nodes.movable():
                share.seen.note_value(await baseline(client, share.params))
        except Exception as exc:  # the node failed the read: the move goes on without it
            log.warning("node PubSub %s: a catch-up read of %s failed: %s", self.name, share.method, exc)

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
                on_lost(exc.message, False)

    def _give_up(self) -> None:
        """No node serves PubSub: every share ends, its listeners told to come back later."""
        shares, self.shares = list(self.shares.values()), {}
        self._by_upstream.clear()
        metrics.WS_UPSTREAM_SUBSCRIPTIONS.set(0)
        for share in shares:
            ready, share.ready = share.ready, None
            if ready is not None and not ready.done():
                ready.set_exception(SubscribeError(-32003, NO_NODE))
                ready.exception()
            for _, on_lost in list(share.listeners.values()):
                on_lost(NO_NODE, True)

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
        await self.nodes.start()
        backoff = 0.1
        failed: set[str] = set()  # the nodes left since a connection last opened
        none = False  # no node served at the last pick (said once, not at every change of the pool's view)
        while True:
            node = self.nodes.pick()
            if node is None or not node.ws_url:
                if not none:
                    log.warning("node PubSub: %s", NO_NODE)
                none = True
                self._give_up()
                await self.nodes.changed()
                continue
            none = False
            if self.node is not None and node.name != self.node.name:
                self.moves += 1
                metrics.UPSTREAM_STREAM_MOVES.inc((Role.PUBSUB.value, node.name))
                log.warning("node PubSub: moving from %s to %s", self.node.name, node.name)
            self.node = node
            connects = self.connects
            try:
                await self._connected_to(node)
                backoff = 0.1
            except asyncio.CancelledError:
                raise
            except (OSError, ConnectionClosed, InvalidHandshake, InvalidURI, TimeoutError) as exc:
                log.warning("node PubSub %s: %s", node.name, exc)
            finally:
                self._ws = None
                self._connected.clear()
                for answer in self._pending.values():
                    if not answer.done():
                        answer.set_exception(ConnectionClosed(None, None))
                        answer.exception()
                self._pending.clear()
            self.nodes.left(node.name)
            if self.connects != connects:  # it opened: every other node may be tried at once again
                failed.clear()
            failed.add(node.name)
            following = self.nodes.pick()
            # A node already left since the last open (the same one, or every one the pool keeps in service
            # refusing in turn): not at once, or two dead nodes the pool has not judged yet would be
            # alternated between as fast as they refuse.
            if following is not None and following.name in failed:
                await asyncio.sleep(backoff * (0.5 + random.random()))  # jitter, not a secret
                backoff = min(self.max_backoff_s, backoff * 2)

    async def _connected_to(self, node: UpstreamNode) -> None:
        """One connection to ``node``, until it drops, hangs, or the pool takes the node out of service."""
        assert node.ws_url is not None
        tls = tls_context(self.ca_file) if node.ws_url.startswith("wss://") else None
        async with connect(
            node.ws_url,
            ssl=tls,
            max_size=64 * 2**20,
            open_timeout=min(self.connect_timeout_s, self.silence_s),
            close_timeout=CLOSE_TIMEOUT_S,
            ping_interval=self.ping_s,
            ping_timeout=self.silence_s,
        ) as ws:
            self._ws = ws
            self.connects += 1
            self._connected.set()
            self._by_upstream.clear()
            for share in list(self.shares.values()):  # the first connection, or a reconnect
                share.upstream_id = None
                self._spawn(self._subscribe_upstream(share))
            watch = asyncio.create_task(self._watch(node.name, ws))
            try:
                async for raw in ws:
                    self._on_message(raw)
            finally:
                await cancel_and_wait(watch)

    async def _watch(self, name: str, ws: ClientConnection) -> None:
        """Close the connection when the pool takes its node out of service (another serves, or none does)."""
        while not (self.nodes.should_leave(name) or self.nodes.none_serve()):
            await self.nodes.changed()
        log.warning("node PubSub %s left service in the pool; leaving it", name)
        await ws.close(1001, "node left service")

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
        self._deliver(share, params.get("result"))

    def _deliver(self, share: _Share, result: Any) -> None:
        body = orjson.dumps(result)
        if not share.seen.fresh(result, body):
            return  # the node before the move sent it already
        if share.method == "accountSubscribe":
            share.seen.note_value(result)
        final = share.final_when(result)
        if final:
            if share.upstream_id is not None:
                self._by_upstream.pop(share.upstream_id, None)
            self.shares.pop(share.key, None)
            metrics.WS_UPSTREAM_SUBSCRIPTIONS.set(len(self.shares))
        for listener, _ in list(share.listeners.values()):
            listener(body, final)

    async def close(self) -> None:
        task, self._task = self._task, None
        await cancel_and_wait(task)
        for background in list(self._background):
            await cancel_and_wait(background)


def _http_of(ws_url: str) -> str:
    """The HTTP URL of a node known by its PubSub URL alone (a test's node; nothing is asked of it)."""
    return "https" + ws_url[3:] if ws_url.startswith("wss") else "http" + ws_url[2:]


async def _send_quietly(ws: ClientConnection, request: bytes) -> None:
    with contextlib.suppress(ConnectionClosed, OSError):
        await ws.send(request)


def _log_failure(task: asyncio.Task[None]) -> None:
    if not task.cancelled() and task.exception() is not None:
        log.error("node PubSub task failed", exc_info=task.exception())

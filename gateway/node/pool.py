"""The pool of nodes as one process uses it: each call to a node in service for its role, reads retried
and hedged on another node, sends on every node at once.

What the pool knows of each node comes from its owner (:mod:`gateway.node.health`): every
``exchange_s`` the process hands it what it saw of each node (a :class:`Tally`) and gets back the
current :class:`PoolView`, off the request path. A call reads only this process's copy of the view.

- **Choice**: the first node in service for the role, primaries before fallbacks, in the pool's order
  (a sticky primary: every process asks the same node while it serves, so a caller's answers come from
  one node). A node this process just saw fail is asked last for a second (its owner hears of it at the
  next report). A caller is asked only of a node known to be at or past the slots and block heights it
  was shown (:mod:`gateway.core.slots`), waiting up to ``floor_wait_s`` for one to get there.
- **Retries and hedges** (reads only): a read that fails in transport, with an HTTP error, a timeout or
  the node's own "unhealthy / behind" answer (its code, -32005: :data:`gateway.node.members.RETRYABLE_CODES`)
  is asked of the next node within the call's deadline; any other answer, an error included, is the
  caller's and is never asked again. A caller's read still unanswered after its method's recent p90 (at
  least ``hedge_min_s``) is asked of a second node too, the first answer wins and the other is cancelled.
  Each extra call spends a token of the node asked per call it holds (a batch's items; ``extra_calls_per_s``
  a second, five seconds' worth at most): providers bill per call. While several callers want extra calls
  of a node, none gets more than an even share (:meth:`PoolNode.take_extra`). A read that could not have
  reached the node (no connection) is retried without a token.
- **What counts against a node** (docs/architecture.md): transport failures, HTTP errors, its own -32005,
  and the timeouts and lost hedge races of light calls only: a heavy read's time (``heavy``, the heavy
  role) is what the caller asked for, so its timeout, its latency and the races it loses are neither
  tallied nor make the node suspect. The gateway's own state (its answer bytes budget full) is not tallied,
  nor its own slowness: a light call's latency is the time this process's loop was free while it was in
  flight (:class:`gateway.node.loop_lag.LoopLag`), and its timeout counts only when the node had at least half
  of it (a replica saturated under load reads every node's answers late: not the nodes' doing).
- **Sends** (:meth:`NodePool.send`): ``sendTransaction`` goes to every node in service for sends
  (:mod:`gateway.node.sends`); the simulation of its preflight runs once, before anything is broadcast.

Hand-written: no Python client of JSON-RPC nodes offers health-driven selection, hedging and broadcast
(eRPC and dRPC's NodeCore do it in Go, as separate proxies); the transport is :mod:`gateway.node.wire`.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from bisect import bisect_left
from collections import deque
from collections.abc import Callable, Collection, Coroutine, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import orjson

from gateway.base import metrics
from gateway.base.config import ServiceSettings
from gateway.base.log_throttle import LogThrottle
from gateway.base.stopping import cancel_and_wait
from gateway.core.node_health import EDGES, PoolView
from gateway.core.slots import SIZE, Floors, admits
from gateway.core.upstreams import RPC_ROLES, Role, UpstreamNode, check_pool, serving
from gateway.node.health import HealthSettings, LocalHealth, PoolHealth, Report
from gateway.node.http import (
    DEFAULT_MAX_ANSWER_BYTES,
    HttpUpstream,
    Upstream,
    UpstreamTimeout,
    UpstreamTooLarge,
    UpstreamUnavailable,
)
from gateway.node.loop_lag import LoopLag
from gateway.node.members import BURST_S, SUSPECT_S, Answer, PoolNode, node_trouble, not_the_nodes, outran
from gateway.node.sends import Broadcast, is_send
from gateway.node.wire import DEFAULT_BUFFERED_BYTES, AnswerBudget

log = logging.getLogger(__name__)
throttled = LogThrottle(log)

#: The hedging key of the gateway's own reads (their methods are not read from their bodies).
INTERNAL = "gateway's own"
#: Latencies a process keeps per method for its hedging p90, and the fewest before it hedges on them.
LATENCY_SAMPLES, MIN_SAMPLES = 200, 20


class HealthSource(Protocol):
    """Where a process sends its tallies and gets the pool's view: the cluster's owner, or its own."""

    async def exchange(self, report: Report, known_version: int) -> PoolView | None: ...

    async def close(self) -> None: ...


SourceFactory = Callable[[Sequence[UpstreamNode], HealthSettings], HealthSource]
_source_factory: SourceFactory | None = None


def use_health_source(factory: SourceFactory | None) -> None:
    """Make every pool of this process read the pool's health from ``factory``'s source (the runtime
    installs the ``upstream-health`` actor's client in each replica and actor); None: each pool owns its own."""
    global _source_factory
    _source_factory = factory


@contextlib.contextmanager
def health_source(factory: SourceFactory) -> Iterator[None]:
    """``factory`` for the pools that start within the block (a pool takes its source when it starts),
    the process's own before and after it (a benchmark's stand-in)."""
    before = _source_factory
    use_health_source(factory)
    try:
        yield
    finally:
        use_health_source(before)


def _own_health(nodes: Sequence[UpstreamNode], settings: HealthSettings) -> HealthSource:
    return LocalHealth(PoolHealth(nodes, settings))


class NoNode(Exception):
    """No node of the pool is in service for ``role``: nothing was tried."""

    def __init__(self, role: Role) -> None:
        super().__init__(f"no upstream node is in service for {role.value}")
        self.role = role


@dataclass(frozen=True)
class PoolSettings:
    connections: int = 512
    max_answer_bytes: int = DEFAULT_MAX_ANSWER_BYTES
    buffered_answer_bytes: int = DEFAULT_BUFFERED_BYTES
    ca_file: str | None = None
    exchange_s: float = 0.25
    hedge_min_s: float = 0.01
    hedge_unknown_s: float = 0.25  # a method with too few recent answers to know its p90
    extra_calls_per_s: float = 20.0
    floor_wait_s: float = 1.0
    health: HealthSettings = field(default_factory=HealthSettings)


class NodePool:
    """Every node of the pool, as one process asks them. An :class:`gateway.node.http.Upstream`."""

    def __init__(
        self,
        nodes: Sequence[UpstreamNode],
        settings: PoolSettings | None = None,
        source: HealthSource | None = None,
    ) -> None:
        problems = check_pool(nodes)
        if problems:
            raise ValueError("; ".join(problems))
        self.settings = settings or PoolSettings()
        self.configured = list(nodes)
        self._budget = AnswerBudget(self.settings.buffered_answer_bytes)
        self.nodes: dict[str, PoolNode] = {n.name: self._node(n) for n in nodes}
        self.view = PoolView(-1, ())
        self._serving: dict[Role, list[PoolNode]] = {}
        self._several: dict[Role, bool] = {role: len(serving(nodes, role)) > 1 for role in Role}
        #: one node serving every call's role: nothing to choose, split or broadcast (the common pool of one)
        self.one_node = _one_node(nodes)
        self._source = source
        self._owns_source = source is None
        self._task: asyncio.Task[None] | None = None
        self._starting: asyncio.Future[None] | None = None
        self._changed: asyncio.Event | None = None
        self._latency: dict[str, deque[float]] = {}
        self._p90: dict[str, float] = {}
        self._first_reads: str | None = None
        self.lag = LoopLag()  # the time this process's loop was held up while a call was in flight
        self._background: set[asyncio.Task[Any]] = set()
        self.sends = Broadcast(self._attempt)
        self.floors = Floors()

    @classmethod
    def from_settings(cls, settings: ServiceSettings, connections: int = 512) -> NodePool:
        """The pool the settings describe (``upstreams``, or the single-node settings), ``connections`` to each."""
        pool = PoolSettings(
            connections=connections,
            max_answer_bytes=settings.upstream_max_answer_bytes,
            buffered_answer_bytes=settings.upstream_buffered_answer_bytes,
            ca_file=settings.upstream_ca_file,
            hedge_min_s=settings.upstream_hedge_min_ms / 1000,
            extra_calls_per_s=settings.upstream_extra_calls_per_s,
            health=HealthSettings.from_settings(settings),
        )
        return cls(settings.pool_nodes(), pool)

    def _node(self, node: UpstreamNode) -> PoolNode:
        s = self.settings
        client = HttpUpstream(
            node.rpc_url,
            connections=s.connections,
            max_answer_bytes=s.max_answer_bytes,
            budget=self._budget,
            ca_file=s.ca_file,
            headers=node.headers,
            name=node.name,
        )
        return PoolNode(node, client, BURST_S * s.extra_calls_per_s)

    # -- what the rest of the process reads ------------------------------------------------------------

    @property
    def ready(self) -> bool:
        """Whether a node is in service for reads (a call can be answered)."""
        return bool(self._serving.get(Role.READS))

    def serves(self, role: Role) -> bool:
        return bool(self._serving.get(role))

    def several(self, role: Role) -> bool:
        """Whether more than one node may serve ``role``: only then can a caller's calls move between nodes."""
        return self._several.get(role, False)

    def together(self, roles: Collection[Role]) -> bool:
        """Whether calls of all ``roles`` go in one request to one node: the same node is first for each,
        and no send is to go to several nodes."""
        if Role.SENDS in roles and self.several(Role.SENDS):
            return False
        firsts = {id(nodes[0]) if (nodes := self._serving.get(role)) else None for role in roles}
        return len(firsts) == 1 and None not in firsts

    @property
    def finalized_slot(self) -> int | None:
        """The newest finalized slot of the node reads go to."""
        best = self.view.best()
        return best.slots[2] if best is not None and best.slots is not None else None

    def best_position(self, role: Role) -> list[int]:
        """The furthest the nodes in service for ``role`` are known to be, at each index of a position."""
        positions = [n.position for n in self._serving.get(role, ())]
        return [max(values) for values in zip(*positions, strict=True)] if positions else [0] * SIZE

    def stream_nodes(self, role: Role) -> list[UpstreamNode]:
        """The nodes in service for a stream's ``role`` (``pubsub``, ``geyser``), in the pool's order."""
        return [n.node for n in self._serving.get(role, ())]

    def client_of(self, name: str) -> HttpUpstream | None:
        """The JSON-RPC client of the node ``name`` (a stream's catch-up reads ask the node it moved to)."""
        known = self.nodes.get(name)
        return known.client if known is not None else None

    async def changed(self) -> None:
        """Return at the pool's next view (its owner's next judgement that changed anything)."""
        if self._changed is None:
            self._changed = asyncio.Event()
        await self._changed.wait()

    def learned(self, node: str, index: int, value: int) -> None:
        """An answer of ``node`` showed it at ``value`` (a slot or height, at ``index`` of a position)."""
        known = self.nodes.get(node)
        if known is not None and value > known.position[index]:
            known.position[index] = value

    # -- the owner ---------------------------------------------------------------------------------------

    async def start(self) -> None:
        """Get the first view of the pool (once, whoever asks first), then follow it in the background."""
        if self._task is not None:
            return
        if self._starting is None:
            self._starting = asyncio.get_running_loop().create_future()
            try:
                if self._source is None:
                    self._source = (_source_factory or _own_health)(self.configured, self.settings.health)
                await self._exchange()
            finally:
                self._task = asyncio.get_running_loop().create_task(self._follow(), name="node-pool")
                self._starting.set_result(None)
        else:
            await asyncio.shield(self._starting)

    async def close(self) -> None:
        await cancel_and_wait(self._task)
        await self.sends.close()
        for task in list(self._background):
            await cancel_and_wait(task)
        if self._source is not None and self._owns_source:
            await self._source.close()
        for node in self.nodes.values():
            await node.client.close()

    async def _follow(self) -> None:
        while True:
            await asyncio.sleep(self.settings.exchange_s)
            await self._exchange()

    async def _exchange(self) -> None:
        assert self._source is not None
        report = {name: node.take_tally() for name, node in self.nodes.items() if node.tally.calls}
        try:
            view = await self._source.exchange(report, self.view.version)
        except Exception as exc:  # the owner away (restarting): keep the last view, try again
            throttled.warning("owner", "upstream pool: the pool's health could not be read: %s", exc)
            return
        if view is not None:
            self._apply(view)

    def _apply(self, view: PoolView) -> None:
        nodes: dict[str, PoolNode] = {}
        for nv in view.nodes:
            known = self.nodes.get(nv.name)
            if known is None or known.node != nv.node:  # added, or added again with other settings
                if known is not None:
                    self._spawn(known.client.close())
                known = self._node(nv.node)
            known.learn(nv)
            nodes[nv.name] = known
        for name, gone in self.nodes.items():
            if name not in nodes:
                self._spawn(gone.client.close())
        self.nodes = nodes
        self._serving = {role: [nodes[v.name] for v in view.serving(role)] for role in Role}
        self._several = {role: len(serving((v.node for v in view.nodes), role)) > 1 for role in Role}
        self.one_node = _one_node([v.node for v in view.nodes])
        first = self._serving[Role.READS][0].name if self._serving[Role.READS] else None
        if first is not None and self._first_reads is not None and first != self._first_reads:
            metrics.UPSTREAM_FAILOVERS.inc((first,))
        self._first_reads = first or self._first_reads
        self.view = view
        if self._changed is not None:
            self._changed.set()
            self._changed = None

    # -- reads -------------------------------------------------------------------------------------------

    async def post(self, body: bytes, timeout_s: float, *, replayable: bool = False) -> bytes:
        """The :class:`~gateway.node.http.Upstream` of the gateway's own calls: reads retried and hedged on
        another node; of the rest (a small body, read to tell), ``sendTransaction`` on every node, anything
        else once to the first node that serves sends."""
        if replayable:
            return (await self.read(body, timeout_s, key=INTERNAL)).raw
        if is_send(body):
            return (await self.send(body, timeout_s)).raw
        return (await self.read(body, timeout_s, Role.SENDS, retry=False)).raw

    async def pinned(self, role: Role = Role.READS) -> PinnedUpstream:
        """An ``Upstream`` whose every call goes to the node first for ``role`` now, and to no other: for reads
        whose meaning is one node's view (a tip and the blocks up to it; a blockhash found invalid, then a
        status found absent). Raises :class:`NoNode`."""
        if self._task is None:
            await self.start()
        return PinnedUpstream(self, self._choices(role)[0], role)

    def role(self, role: Role) -> RoleUpstream:
        """An ``Upstream`` of this pool for the gateway's own calls of ``role`` (heavy indexed reads)."""
        return RoleUpstream(self, role)

    async def read(
        self,
        body: bytes,
        timeout_s: float,
        role: Role = Role.READS,
        *,
        key: str | None = None,
        need: list[int] | None = None,
        parse: bool = False,
        retry: bool = True,
        caller: str | None = None,
        heavy: bool = False,
    ) -> Answer:
        """The answer of a node in service for ``role``. ``key``: the method (or ``batch``) whose recent
        p90 a hedge waits for (None: no hedge); ``need``: the position a node must be at
        (:func:`gateway.core.slots.needs`); ``parse``: read the answer's JSON (and so see the node's own
        "unhealthy / behind"); ``retry``: False for a call that must reach a node at most once; ``caller``:
        whose call it is (an account; None: the gateway's own), for its share of the nodes' extra calls;
        ``heavy``: a heavy read (as every read of the heavy role is), whose time is the caller's doing.

        Raises :class:`NoNode` (nothing tried), or what the last node asked failed with."""
        if self._task is None:
            await self.start()
        heavy = heavy or role is Role.HEAVY
        nodes = self._serving.get(role)
        if nodes and (len(nodes) == 1 or not retry):
            if need is not None:  # the one node left of several: it too must be at the caller's floor
                await self._reach(nodes[0], need, asyncio.get_running_loop().time() + timeout_s)
            return await self._attempt(nodes[0], body, timeout_s, parse, replayable=retry, heavy=heavy)
        deadline = asyncio.get_running_loop().time() + timeout_s
        return await self._race(self._choices(role), body, deadline, key, need, caller or "", heavy)

    def _choices(self, role: Role) -> list[PoolNode]:
        """The nodes in service for ``role``, those this process just saw fail last."""
        nodes = self._serving.get(role)
        if not nodes:
            raise NoNode(role)
        if len(nodes) == 1:
            return nodes
        now = time.monotonic()
        return [n for n in nodes if n.suspect_until <= now] + [n for n in nodes if n.suspect_until > now]

    async def _reach(self, node: PoolNode, need: list[int], deadline: float) -> None:
        """Wait until ``node`` is known to be at ``need`` (a caller's floor), at most ``floor_wait_s``; then
        it is asked anyway (the caller may see an older slot: docs/api.md, Several nodes)."""
        loop = asyncio.get_running_loop()
        until = min(deadline, loop.time() + self.settings.floor_wait_s)
        while not admits(node.position, need) and loop.time() < until:
            if self._changed is None:
                self._changed = asyncio.Event()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._changed.wait(), until - loop.time())

    async def _attempt_at(
        self, node: PoolNode, body: bytes, deadline: float, need: list[int] | None, heavy: bool
    ) -> Answer:
        """:meth:`_attempt` once ``node`` is at ``need``, within ``deadline``."""
        loop = asyncio.get_running_loop()
        if need is not None:
            await self._reach(node, need, deadline)
        return await self._attempt(node, body, max(0.001, deadline - loop.time()), True, heavy=heavy)

    async def _attempt(
        self,
        node: PoolNode,
        body: bytes,
        timeout_s: float,
        parse: bool,
        *,
        replayable: bool = True,
        heavy: bool = False,
    ) -> Answer:
        """One request to one node, tallied; raises the node's failure. ``replayable``: a read, which the
        node client may send once more on a new connection when a kept-alive one was closed under it;
        ``heavy``: a heavy read, whose time and timeout are not the node's (neither tallied nor suspect).
        A failure that says nothing of the node (:func:`gateway.node.members.not_the_nodes`) is not tallied."""
        started = time.perf_counter()
        held_before = self.lag.held()
        outcome = "ok"
        judged = True  # tallied for the pool's owner, who judges the node by it
        with self.lag.watching():
            try:
                status, raw = await node.client.exchange(body, timeout_s, replayable=replayable)
                if status != 200 and (status == 429 or not raw.startswith((b"{", b"["))):
                    outcome = "throttled" if status == 429 else "http"
                    raise UpstreamUnavailable(f"the node answered HTTP {status}", sent=True, status=status)
                answer = Answer(raw, node.node.name)
                if parse:
                    try:
                        answer.doc = orjson.loads(raw)
                    except orjson.JSONDecodeError as exc:
                        outcome = "http"
                        raise UpstreamUnavailable("the node answered something that is not JSON", sent=True) from exc
                    if node_trouble(answer.doc):
                        outcome = "unhealthy"
                        answer.retryable = True
                return answer
            except UpstreamTooLarge:
                outcome = "too_large"
                raise
            except UpstreamTimeout:
                outcome = "timeout"
                # a heavy read's timeout is what it asked for; a light one's is the node's only if the node had
                # most of it: this process's loop held up for half of it is the gateway's own slowness
                judged = not heavy and self._own_time(started, held_before) >= timeout_s / 2
                if judged:
                    node.suspect_until = time.monotonic() + SUSPECT_S
                raise
            except UpstreamUnavailable as exc:
                if outcome == "ok":
                    outcome = "unavailable"
                judged = not not_the_nodes(exc)
                if judged:
                    node.suspect_until = time.monotonic() + SUSPECT_S
                raise
            except asyncio.CancelledError:
                outcome = "cancelled"
                raise
            finally:
                seconds = time.perf_counter() - started
                metrics.UPSTREAM_SECONDS.observe(seconds, node.ok if outcome == "ok" else (node.node.name, outcome))
                if outcome != "cancelled" and judged:  # inline: every call a process sends passes here
                    tally = node.tally
                    tally.calls += 1
                    if not heavy:  # a heavy read's time is the caller's: never the node's latency
                        tally.latency[bisect_left(EDGES, self._own_time(started, held_before))] += 1
                    kind = _FAILURE_KIND.get(outcome)  # none for an answer (too large is the node answering)
                    if kind is not None:
                        tally.failures[kind] = tally.failures.get(kind, 0) + 1

    def _own_time(self, started: float, held_before: float) -> float:
        """Seconds since ``started`` that this process's loop was not held up: the node's time."""
        return max(0.0, time.perf_counter() - started - (self.lag.held() - held_before))

    async def _race(
        self,
        nodes: list[PoolNode],
        body: bytes,
        deadline: float,
        key: str | None,
        need: list[int] | None,
        caller: str = "",
        heavy: bool = False,
    ) -> Answer:
        """Ask ``nodes[0]``; hedge to the next after the key's p90, retry on the next after a failure. An
        extra call costs ``caller`` a token per call ``body`` holds; a race a heavy read's hedge wins says
        nothing of ``nodes[0]`` (the read may be slow anywhere).

        The nodes stay in the pool's order even when the first is not known to be at the caller's floor:
        it is waited for to get there (:meth:`_reach`), and the hedge's clock starts then (a hedge that wins
        while the first node has not been asked says nothing of it). Putting first the nodes known to be at
        the floor would let the node a floor came from keep every caller: its answers raise the floors past
        what the other nodes' last probes showed."""
        loop = asyncio.get_running_loop()
        if need is not None:
            await self._reach(nodes[0], need, deadline)
        started = loop.time()
        pending: dict[asyncio.Task[Answer], PoolNode] = {}
        left = list(nodes)
        hedge: PoolNode | None = None
        hedge_at = None if key is None else started + self._hedge_delay(key)
        kept: Answer | None = None  # a node's own "unhealthy" answer, passed on when nothing better comes
        failure: BaseException | None = None
        cost = 0  # the calls ``body`` holds, counted at the first extra call

        def extra(node: PoolNode) -> bool:
            nonlocal cost
            cost = cost or calls_in(body)
            return node.take_extra(self.settings.extra_calls_per_s, cost, caller)

        def ask(node: PoolNode) -> None:
            left.remove(node)
            pending[loop.create_task(self._attempt_at(node, body, deadline, need, heavy))] = node

        ask(left[0])
        try:
            while pending and loop.time() < deadline:
                wait_until = deadline if hedge_at is None or hedge is not None else min(deadline, hedge_at)
                done, _ = await asyncio.wait(pending, timeout=wait_until - loop.time(), return_when="FIRST_COMPLETED")
                if not done:
                    if hedge is None and hedge_at is not None and loop.time() >= hedge_at:
                        hedge_at = None
                        if left and extra(left[0]):
                            hedge = left[0]
                            ask(hedge)
                    continue
                for task in done:
                    node = pending.pop(task)
                    error = task.exception()
                    if error is None:
                        answer = task.result()
                        if not answer.retryable:
                            if hedge is not None:
                                metrics.UPSTREAM_HEDGES.inc((hedge.name, "won" if node is hedge else "lost"))
                            if node is nodes[0] or (node is hedge and not heavy):
                                outran(nodes[0], node is hedge)
                            if key is not None and node is not hedge:
                                self._sample(key, loop.time() - started)
                            return answer
                        kept = answer
                    elif not_the_nodes(error):
                        raise error  # any node would answer the same
                    else:
                        failure = error
                    if not pending and left:
                        free = isinstance(error, UpstreamUnavailable) and not error.sent
                        nxt = left[0]
                        if free or extra(nxt):
                            metrics.UPSTREAM_RETRIES.inc((nxt.name,))
                            ask(nxt)
        finally:
            for task in pending:
                task.cancel()
                task.add_done_callback(_retrieved)
        if kept is not None:
            return kept
        if pending or failure is None:
            raise UpstreamTimeout(f"no answer within {deadline - started:g} s")
        raise failure

    def _hedge_delay(self, key: str) -> float:
        p90 = self._p90.get(key)
        return max(self.settings.hedge_min_s, p90 if p90 is not None else self.settings.hedge_unknown_s)

    def _sample(self, key: str, seconds: float) -> None:
        samples = self._latency.get(key)
        if samples is None:
            if len(self._latency) >= 1024:  # methods are a fixed set; a bound all the same
                return
            samples = self._latency[key] = deque(maxlen=LATENCY_SAMPLES)
        samples.append(seconds)
        if len(samples) >= MIN_SAMPLES and len(samples) % 10 == 0:
            ordered = sorted(samples)
            self._p90[key] = ordered[int(0.9 * (len(ordered) - 1))]

    # -- sends -------------------------------------------------------------------------------------------

    async def send(self, body: bytes, timeout_s: float) -> Answer:
        """``sendTransaction`` (``body``: one request) on every node in service for sends
        (:mod:`gateway.node.sends`)."""
        if self._task is None:
            await self.start()
        return await self.sends.send(self._choices(Role.SENDS), body, timeout_s)

    def _spawn(self, coro: Coroutine[Any, Any, Any]) -> None:
        task = asyncio.get_running_loop().create_task(coro)
        self._background.add(task)
        task.add_done_callback(self._background.discard)


class RoleUpstream:
    """The pool as an ``Upstream`` whose reads go to the nodes of one role."""

    def __init__(self, pool: NodePool, role: Role) -> None:
        self.pool = pool
        self.role_name = role

    async def post(self, body: bytes, timeout_s: float, *, replayable: bool = False) -> bytes:
        if not replayable:
            return await self.pool.post(body, timeout_s)
        return (await self.pool.read(body, timeout_s, self.role_name)).raw


class PinnedUpstream:
    """The pool as an ``Upstream`` of one of its nodes (:meth:`NodePool.pinned`): no retry, no hedge elsewhere.
    A request still unanswered when the pool takes the node out of service (hung, dead) fails at once,
    rather than waiting out its timeout: the caller's pass stops and the next one is on another node."""

    def __init__(self, pool: NodePool, node: PoolNode, role: Role) -> None:
        self.pool = pool
        self.node = node
        self.role = role

    def _serving(self) -> bool:
        return any(n is self.node for n in self.pool._serving.get(self.role, ()))

    async def post(self, body: bytes, timeout_s: float, *, replayable: bool = False) -> bytes:
        loop = asyncio.get_running_loop()
        request = loop.create_task(self.pool._attempt(self.node, body, timeout_s, False, replayable=replayable))
        try:
            while True:
                changed = loop.create_task(self.pool.changed())
                try:
                    await asyncio.wait({request, changed}, return_when=asyncio.FIRST_COMPLETED)
                finally:
                    changed.cancel()
                if request.done():
                    return request.result().raw
                if not self._serving():
                    raise UpstreamUnavailable(f"node {self.node.node.name} left service", sent=True)
        finally:
            if not request.done():
                request.cancel()
                await asyncio.wait({request})
            if not request.cancelled():
                request.exception()  # retrieved: a failure after the node left is not the caller's


async def one_node_of(upstream: Upstream) -> Upstream:
    """``upstream`` pinned to its node first for reads now, when it is a pool that may move between nodes
    (:meth:`NodePool.pinned`); else ``upstream`` itself."""
    if isinstance(upstream, NodePool) and upstream.several(Role.READS):
        return await upstream.pinned(Role.READS)
    return upstream


_FAILURE_KIND = {  # an outcome (of gateway_upstream_request_duration_seconds) as the owner tallies its failures
    "timeout": "timeout",
    "unavailable": "transport",
    "http": "http",
    "throttled": "http",
    "unhealthy": "unhealthy",
}


def calls_in(body: bytes) -> int:
    """The calls a request asks of a node: a batch's items, else one."""
    if body.lstrip()[:1] != b"[":
        return 1
    try:
        doc = orjson.loads(body)
    except orjson.JSONDecodeError:
        return 1
    return max(1, len(doc)) if isinstance(doc, list) else 1


def _one_node(nodes: Sequence[UpstreamNode]) -> bool:
    return len(nodes) == 1 and all(nodes[0].serves(role) for role in RPC_ROLES)


def _retrieved(task: asyncio.Task[Any]) -> None:
    if not task.cancelled():
        task.exception()


def node_client(settings: ServiceSettings, connections: int = 4) -> NodePool:
    """The actor's own few connections to each node of the pool, the pool's health read from its owner."""
    return NodePool.from_settings(settings, connections)

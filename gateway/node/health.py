"""The owner of the pool's health: probes every node, gathers what the processes saw of each, judges
which nodes serve (:func:`gateway.core.node_health.judge`) and hands every process the result
(:class:`gateway.core.node_health.PoolView`) when it reports.

One per Ray cluster: the ``upstream-health`` actor runs it (``gateway/upstreams/health_actor.py``), and
every replica and actor reads its view through :class:`gateway.node.pool.NodePool` without a call on the
request path. A process with no cluster (a test building the app, a tool) runs its own
(:class:`LocalHealth`). The operator's changes (nodes added, removed, cordoned) come from ``changes``, a
callback the actor reads from PostgreSQL.

Each node is probed on its own loop (a hung node's probe waits out its timeout without holding up the
others'); the pool is judged every ``judge_s`` and after every probe round. A probe's timeout and latency are
the node's own time: while this process's loop is held up (a saturated gateway reading answers late) the
clock a probe runs on stops (:class:`gateway.node.loop_lag.LoopLag`), so the gateway's own slowness never takes a
node out of service.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
import time
from collections import deque
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field

from gateway.base import metrics
from gateway.base.config import ServiceSettings
from gateway.base.stopping import cancel_and_wait
from gateway.core.node_health import (
    NodeState,
    NodeView,
    PoolView,
    Probe,
    Tally,
    Thresholds,
    judge,
    reference_genesis,
    view_of,
)
from gateway.core.upstreams import Role, Tier, UpstreamNode, serving
from gateway.node.http import HttpUpstream
from gateway.node.loop_lag import LoopLag
from gateway.node.probe import probe

log = logging.getLogger(__name__)

#: What the processes report: per node name, their tally since their last report.
Report = Mapping[str, Tally]


@dataclass(frozen=True)
class Changes:
    """The operator's changes to the configured pool (``gateway upstreams``): nodes added (appended in
    the order added), configured or added nodes removed, and cordons with their reasons."""

    added: tuple[UpstreamNode, ...] = ()
    removed: frozenset[str] = frozenset()
    cordoned: Mapping[str, str] = field(default_factory=dict)

    def apply(self, configured: Sequence[UpstreamNode]) -> list[UpstreamNode]:
        names = {n.name for n in configured}
        nodes = [n for n in configured if n.name not in self.removed]
        return nodes + [n for n in self.added if n.name not in self.removed and n.name not in names]


@dataclass(frozen=True)
class HealthSettings:
    probe_s: float = 0.3
    probe_timeout_s: float = 1.0
    judge_s: float = 0.3  # as often as each node is probed
    changes_s: float = 0.5
    thresholds: Thresholds = field(default_factory=Thresholds)
    ca_file: str | None = None

    @classmethod
    def from_settings(cls, settings: ServiceSettings) -> HealthSettings:
        thresholds = Thresholds(
            max_lag_slots=settings.upstream_max_lag_slots, out_at_least_s=settings.upstream_out_at_least_s
        )
        return cls(
            probe_s=settings.health_poll_s,
            judge_s=settings.health_poll_s,
            probe_timeout_s=settings.upstream_probe_timeout_s,
            thresholds=thresholds,
            ca_file=settings.upstream_ca_file,
        )


class PoolHealth:
    """Runs on one event loop (:meth:`run`); :meth:`exchange` may be called from any thread."""

    def __init__(
        self,
        nodes: Sequence[UpstreamNode],
        settings: HealthSettings | None = None,
        changes: Callable[[], Awaitable[Changes]] | None = None,
    ) -> None:
        self.settings = settings or HealthSettings()
        self.configured = list(nodes)
        self.changes = Changes()
        self._read_changes = changes
        self.states: dict[str, NodeState] = {}
        self._clients: dict[str, HttpUpstream] = {}
        self._probes: dict[str, asyncio.Task[None]] = {}
        self._inbox: deque[tuple[float, Report]] = deque()  # appended from any thread, taken on the loop
        self._lock = threading.Lock()
        self.view = PoolView(0, ())
        self.genesis: str | None = None
        self._in_service: dict[str, bool] = {}
        self.probed = asyncio.Event()  # set by every probe's result (a new process waits for the first ones)
        self.lag = LoopLag()  # how late this loop reads the probes' answers: not the nodes' time

    # -- what processes call -------------------------------------------------------------------------

    def exchange(self, report: Report, known_version: int) -> PoolView | None:
        """Take a process's tallies; the current view, or None when it already has it."""
        if report:
            self._inbox.append((time.time(), report))
        view = self.view
        return None if view.version == known_version else view

    def status(self) -> dict[str, object]:
        """Every node by name (never its URLs), as ``gateway status`` shows it."""
        return {"genesis": self.genesis, "nodes": [v.summary() for v in self.view.nodes]}

    # -- the loop ------------------------------------------------------------------------------------

    async def run(self, stop: asyncio.Event) -> None:
        """Probe, judge and publish until ``stop`` is set; then close the probes' connections."""
        self._set_nodes(self.changes.apply(self.configured))
        tasks = [asyncio.create_task(self._judging(stop), name="pool-judge")]
        if self._read_changes is not None:
            tasks.append(asyncio.create_task(self._following_changes(stop), name="pool-changes"))
        try:
            await stop.wait()
        finally:
            for task in [*tasks, *self._probes.values()]:
                await cancel_and_wait(task)
            self._probes.clear()
            for client in self._clients.values():
                await client.close()
            self._clients.clear()

    def _set_nodes(self, nodes: Sequence[UpstreamNode]) -> None:
        """The pool is ``nodes``: new ones get a state, a client and a probe loop; gone ones lose theirs."""
        wanted = {n.name: n for n in nodes}
        for name in [n for n in self.states if n not in wanted or self.states[n].node != wanted[n]]:
            self.states.pop(name)
            task = self._probes.pop(name, None)
            if task is not None:
                task.cancel()
            client = self._clients.pop(name, None)
            if client is not None:
                asyncio.get_running_loop().create_task(client.close())
        states: dict[str, NodeState] = {}
        for node in nodes:
            state = self.states.get(node.name)
            if state is None:
                state = NodeState(node)
                self._clients[node.name] = HttpUpstream(
                    node.rpc_url, connections=2, ca_file=self.settings.ca_file, headers=node.headers, name=node.name
                )
                self._probes[node.name] = asyncio.get_running_loop().create_task(
                    self._probing(state), name=f"probe-{node.name}"
                )
            state.cordoned = self.changes.cordoned.get(node.name)
            states[node.name] = state
        self.states = states  # in the pool's order: configured first, then added

    async def _probing(self, state: NodeState) -> None:
        client = self._clients[state.node.name]
        while True:
            found = await probe(client, self.settings.probe_timeout_s, self.lag)
            self._record(state, found)
            await asyncio.sleep(max(0.0, self.settings.probe_s - found.latency_s))

    def _record(self, state: NodeState, found: Probe) -> None:
        state.record_probe(found)
        self.probed.set()
        tally = Tally()
        tally.record(found.latency_s, None if found.failure is None else "transport")
        state.window.add(found.at, tally)

    async def _judging(self, stop: asyncio.Event) -> None:
        while not stop.is_set():
            self.judge_now()
            await asyncio.sleep(self.settings.judge_s)

    def judge_now(self) -> PoolView:
        """Take the processes' tallies, judge every node and publish the view."""
        while self._inbox:
            at, report = self._inbox.popleft()
            for name, tally in report.items():
                state = self.states.get(name)
                if state is not None:
                    state.window.add(at, tally)
        now = time.time()
        states = list(self.states.values())
        self.genesis = judge(states, now, self.settings.thresholds)
        self.view = view_of(states, self.view.version + 1, self.genesis, now, self.settings.thresholds)
        self._report_changes()
        return self.view

    async def _following_changes(self, stop: asyncio.Event) -> None:
        assert self._read_changes is not None
        while not stop.is_set():
            try:
                changes = await self._read_changes()
            except Exception as exc:  # the store down: keep the pool as it is, try again
                log.warning("upstream pool: the operator's changes could not be read: %s", exc)
            else:
                if changes != self.changes:
                    self.changes = changes
                    self._set_nodes(changes.apply(self.configured))
            await asyncio.sleep(self.settings.changes_s)

    def _report_changes(self) -> None:
        """Log every node's move in or out of service (by name), and set the pool's gauges."""
        for view in self.view.nodes:
            before = self._in_service.get(view.name)
            if before != view.in_service:
                if view.in_service:
                    log.info("upstream %s in service", view.name)
                elif before is not None:
                    log.warning("upstream %s out of service: %s", view.name, view.reason)
                self._in_service[view.name] = view.in_service
            state = self.states[view.name]
            answering = state.probe is not None and state.probe.failure is None
            metrics.UPSTREAM_IN_SERVICE.set(1.0 if view.in_service else 0.0, (view.name,))
            metrics.UPSTREAM_HELD_OUT.set(1.0 if view.cordoned else 0.0, (view.name,))
            metrics.UPSTREAM_UP.set(1.0 if answering else 0.0, (view.name,))
            if view.lag is not None:
                metrics.UPSTREAM_LAG.set(float(view.lag), (view.name,))
        for gone in [n for n in self._in_service if n not in self.states]:
            del self._in_service[gone]
            metrics.UPSTREAM_IN_SERVICE.set(0.0, (gone,))
            metrics.UPSTREAM_HELD_OUT.set(1.0, (gone,))  # removed: its series stays, and says so
            metrics.UPSTREAM_UP.set(0.0, (gone,))
        nodes = [s.node for s in self.states.values()]
        for role in Role:
            metrics.UPSTREAM_SERVING.set(float(len(self.view.serving(role))), (role.value,))
            metrics.UPSTREAM_CONFIGURED.set(float(len(serving(nodes, role))), (role.value,))
        reads = self.view.serving(Role.READS)
        fallback_only = bool(reads) and all(v.node.tier is Tier.FALLBACK for v in reads)
        metrics.UPSTREAM_FALLBACK.set(1.0 if fallback_only else 0.0)


async def cluster_of(nodes: Sequence[UpstreamNode], settings: HealthSettings) -> dict[str, str]:
    """Probe every node once: those of another cluster than most (the pool's: a tie goes to the first
    node's), each with why, by name. A node that does not answer is not judged here (the owner never puts
    one of another cluster in service)."""
    clients = [
        HttpUpstream(n.rpc_url, connections=1, ca_file=settings.ca_file, headers=n.headers, name=n.name) for n in nodes
    ]
    try:
        found = await asyncio.gather(*(probe(c, settings.probe_timeout_s) for c in clients))
    finally:
        for client in clients:
            await client.close()
    states = []
    for node, answer in zip(nodes, found, strict=True):
        state = NodeState(node)
        state.record_probe(answer)
        states.append(state)
    genesis = reference_genesis(states)
    return {
        s.node.name: f"node {s.node.name} serves another cluster: genesis {s.answered.genesis}, the pool's is {genesis}"
        for s in states
        if s.answered is not None and s.answered.genesis not in (None, genesis)
    }


class EveryNodeServes:
    """Every node in service, unprobed: for benchmarks that put a stand-in behind the pool (not a node)."""

    def __init__(self, nodes: Sequence[UpstreamNode]) -> None:
        views = tuple(NodeView(node=n, in_service=True, reason="") for n in nodes)
        self.view = PoolView(1, views)

    async def exchange(self, report: Report, known_version: int) -> PoolView | None:
        return None if known_version == self.view.version else self.view

    async def close(self) -> None:
        return None


class LocalHealth:
    """The pool's health owned in this process: for a process with no cluster (tests, tools)."""

    def __init__(self, owner: PoolHealth) -> None:
        self.owner = owner
        self._stop = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    async def exchange(self, report: Report, known_version: int) -> PoolView | None:
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(self.owner.run(self._stop), name="pool-health")
            await asyncio.sleep(0)  # the owner sets its nodes and starts probing
            await self._first_probes()
        return self.owner.exchange(report, known_version)

    async def _first_probes(self) -> None:
        """Wait (at most a probe's timeout) for each node's first probe, so that a new process knows at once."""
        owner = self.owner
        deadline = time.monotonic() + owner.settings.probe_timeout_s + 0.1
        while any(s.probe is None for s in owner.states.values()) and time.monotonic() < deadline:
            owner.probed.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(owner.probed.wait(), deadline - time.monotonic())
        owner.judge_now()

    async def close(self) -> None:
        self._stop.set()
        if self._task is not None:
            with contextlib.suppress(Exception):
                await self._task
            self._task = None

"""Which nodes of the pool are in service, and why the others are not. Pure: the pool's owner
(:mod:`gateway.node.health`) feeds it probes and the processes' tallies, and publishes what it decides.

A node leaves service at once when it is cordoned, of another cluster, not answering two probes in a row,
unhealthy by its own ``getHealth``, more than ``max_lag_slots`` behind the best node, catching up (its
max-shred-insert slot far past its processed one), failing most calls, or far slower than its peers. It
comes back only after ``out_at_least_s`` out and ``good_probes_back`` good probes in a row (a circuit
breaker: a flapping node does not take traffic back and forth), unless no other node serves a role it
serves: then nothing better exists, and it comes back on its first good probe.

Latency quantiles are read off a fixed histogram (:data:`EDGES`, 25% apart), so a quantile is exact to
that step; error rates and quantiles cover the last :data:`WINDOW_S` seconds, in one-second slots.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from gateway.core.upstreams import Role, Tier, UpstreamNode

#: The commitments a slot or a block height is asked at, in this order in every triple.
COMMITMENTS = ("processed", "confirmed", "finalized")
_COMMITMENT_INDEX = {
    "processed": 0,
    "recent": 0,
    "confirmed": 1,
    "single": 1,
    "singleGossip": 1,
    "finalized": 2,
    "max": 2,
    "root": 2,
}
FINALIZED = 2
#: Upper bounds of the latency histogram, seconds: 0.5 ms to about 44 s, each 25% above the last.
EDGES: tuple[float, ...] = tuple(0.0005 * 1.25**i for i in range(52))
#: The sliding window of the processes' tallies, seconds.
WINDOW_S = 30
#: Failure kinds a process tallies (the owner reads them all alike).
FAILURE_KINDS = ("transport", "timeout", "http", "unhealthy")


def commitment_index(value: Any) -> int:
    """The index in :data:`COMMITMENTS` of a request's ``commitment`` (Agave's default: finalized)."""
    return _COMMITMENT_INDEX.get(value, FINALIZED) if isinstance(value, str) else FINALIZED


@dataclass(frozen=True, slots=True)
class Probe:
    """What one probe of a node found. ``failure`` set: it did not answer, and the rest is unknown."""

    at: float
    latency_s: float
    failure: str | None = None
    health: str | None = None  # None: getHealth "ok"; else the node's own message
    slots: tuple[int, int, int] | None = None  # processed, confirmed, finalized
    heights: tuple[int, int, int] | None = None  # block heights at the same commitments
    max_shred_slot: int | None = None
    genesis: str | None = None
    version: str | None = None


def bucket_of(seconds: float) -> int:
    return bisect.bisect_left(EDGES, seconds)


def quantile(counts: Sequence[int], q: float) -> float | None:
    """The ``q`` quantile of a histogram over :data:`EDGES` (its bucket's upper bound); None when empty."""
    total = sum(counts)
    if total == 0:
        return None
    wanted = q * total
    seen = 0
    for i, n in enumerate(counts):
        seen += n
        if seen >= wanted and n:
            return EDGES[min(i, len(EDGES) - 1)]
    return EDGES[-1]


@dataclass(slots=True)
class Tally:
    """One process's calls to one node since its last report: how many, which failed how, how long."""

    calls: int = 0
    failures: dict[str, int] = field(default_factory=dict)
    latency: list[int] = field(default_factory=lambda: [0] * (len(EDGES) + 1))

    def record(self, seconds: float, failure: str | None = None) -> None:
        self.calls += 1
        self.latency[bucket_of(seconds)] += 1
        if failure is not None:
            self.failures[failure] = self.failures.get(failure, 0) + 1

    def merge(self, other: Tally) -> None:
        self.calls += other.calls
        for kind, n in other.failures.items():
            self.failures[kind] = self.failures.get(kind, 0) + n
        mine = self.latency
        for i, n in enumerate(other.latency):
            if n:
                mine[i] += n

    @property
    def failed(self) -> int:
        return sum(self.failures.values())


class Window:
    """A node's tallies over the last :data:`WINDOW_S` seconds, merged per second."""

    def __init__(self) -> None:
        self._slots: dict[int, Tally] = {}
        self._since = float("-inf")  # what came before is not this node's record now (:meth:`restart`)

    def add(self, at: float, tally: Tally) -> None:
        if at >= self._since:
            self._slots.setdefault(int(at), Tally()).merge(tally)

    def restart(self, at: float) -> None:
        """Forget everything before ``at``, and anything added later of an earlier moment: a node back in
        service is judged on what it did since, as a closed breaker starts its counts anew (the calls
        and probes that failed while it was down would take it out again before it served)."""
        self._slots.clear()
        self._since = at

    def totals(self, now: float, seconds: int = WINDOW_S) -> Tally:
        """What the last ``seconds`` seconds hold (older slots are dropped)."""
        first = int(now) - WINDOW_S + 1
        for second in [s for s in self._slots if s < first]:
            del self._slots[second]
        out = Tally()
        since = int(now) - seconds + 1
        for second, tally in self._slots.items():
            if second >= since:
                out.merge(tally)
        return out


@dataclass(frozen=True)
class Thresholds:
    """When a node leaves service and when it may come back (docs/architecture.md, The pool of nodes)."""

    max_lag_slots: int = 25  # about 10 s of mainnet slots behind the best node
    max_shred_gap: int = 100  # eRPC's: max-shred-insert this far past processed is a node catching up
    failed_probes_out: int = 2
    stale_probe_s: float = 5.0  # a node's slot older than this does not count towards the best
    error_rate_out: float = 0.5
    min_calls: int = 20  # calls in the window before its error rate or latency is judged
    failing_calls_s: int = 2  # calls that all failed in the last seconds take a node out at once...
    failing_calls: int = 3  # ...when at least this many
    slow_factor: float = 5.0
    slow_floor_s: float = 0.25
    out_at_least_s: float = 10.0
    good_probes_back: int = 3


@dataclass(slots=True)
class NodeState:
    """The owner's record of one node."""

    node: UpstreamNode
    cordoned: str | None = None  # the operator's reason, while cordoned
    probe: Probe | None = None  # the last probe, answered or not
    answered: Probe | None = None  # the last probe that answered
    failed_probes: int = 0  # in a row
    good_probes: int = 0  # in a row, judged good
    judged: float = -1.0  # the ``at`` of the last probe counted in good_probes
    in_service: bool = False
    reason: str = "not probed yet"
    out_since: float | None = None  # None: never in service yet
    window: Window = field(default_factory=Window)
    totals: Tally = field(default_factory=Tally)  # the window's, as of the last judgement

    def record_probe(self, probe: Probe) -> None:
        self.probe = probe
        if probe.failure is None:
            self.answered = probe
            self.failed_probes = 0
        else:
            self.failed_probes += 1


def reference_genesis(states: Iterable[NodeState]) -> str | None:
    """The pool's cluster: the genesis hash most nodes answered (a tie: the first node's in the list)."""
    seen: dict[str, int] = {}
    for state in states:
        genesis = state.answered.genesis if state.answered is not None else None
        if genesis:
            seen[genesis] = seen.get(genesis, 0) + 1
    if not seen:
        return None
    most = max(seen.values())
    return next(g for g, n in seen.items() if n == most)


def best_slot(states: Iterable[NodeState], genesis: str | None, now: float, th: Thresholds) -> int | None:
    """The newest processed slot any node of the pool's cluster answered recently."""
    best = None
    for state in states:
        probe = state.answered
        if probe is None or probe.slots is None or now - probe.at > th.stale_probe_s:
            continue
        if genesis is not None and probe.genesis not in (None, genesis):
            continue
        best = probe.slots[0] if best is None else max(best, probe.slots[0])
    return best


def trouble(
    state: NodeState, best: int | None, peers_p50: float | None, genesis: str | None, now: float, th: Thresholds
) -> str | None:
    """Why ``state``'s node should not serve now, or None.

    Its calls judge it only while it serves: a node out of service comes back by its probes and the
    breaker (:func:`_maybe_return`), then starts its calls' record anew; the calls that failed while it
    was down (sent to it when no node served) would otherwise keep it out, or take it out again."""
    if state.cordoned is not None:
        return f"cordoned: {state.cordoned}"
    probe, answered = state.probe, state.answered
    if probe is None:
        return "not probed yet"
    if answered is not None and genesis is not None and answered.genesis not in (None, genesis):
        return f"another cluster: genesis {answered.genesis}, the pool's is {genesis}"
    if state.failed_probes >= th.failed_probes_out or answered is None:
        return f"not answering: {probe.failure}"
    recent = state.window.totals(now, th.failing_calls_s) if state.in_service else Tally()
    if recent.failed >= th.failing_calls and recent.failed == recent.calls:
        return f"its last {recent.failed} calls failed ({_kinds(recent)})"
    if answered.health is not None:
        return f"unhealthy: {answered.health}"
    if answered.slots is not None:
        processed = answered.slots[0]
        if best is not None and best - processed > th.max_lag_slots:
            return f"behind by {best - processed} slots"
        if answered.max_shred_slot is not None and answered.max_shred_slot - processed > th.max_shred_gap:
            return f"catching up: {answered.max_shred_slot - processed} slots received and not yet replayed"
    totals = state.totals
    if state.in_service and totals.calls >= th.min_calls:
        rate = totals.failed / totals.calls
        if rate > th.error_rate_out:
            return f"failing {rate:.0%} of calls ({_kinds(totals)})"
        p50 = quantile(totals.latency, 0.5)
        if p50 is not None and peers_p50 is not None and p50 > max(th.slow_factor * peers_p50, th.slow_floor_s):
            return f"slow: p50 {p50 * 1000:.0f} ms against its peers' {peers_p50 * 1000:.0f} ms"
    return None


def _kinds(tally: Tally) -> str:
    return ", ".join(f"{n} {kind}" for kind, n in sorted(tally.failures.items()))


def _median(values: list[float]) -> float | None:
    if not values:
        return None
    values = sorted(values)
    return values[len(values) // 2]


def judge(states: Sequence[NodeState], now: float, th: Thresholds) -> str | None:
    """Put each node in or out of service as the rules say; returns the pool's genesis hash."""
    genesis = reference_genesis(states)
    best = best_slot(states, genesis, now, th)
    p50s: dict[str, float] = {}
    for state in states:
        state.totals = state.window.totals(now)
        p50 = quantile(state.totals.latency, 0.5) if state.totals.calls >= th.min_calls else None
        if p50 is not None:
            p50s[state.node.name] = p50
    for state in states:
        peers = _median([p for name, p in p50s.items() if name != state.node.name])
        why = trouble(state, best, peers, genesis, now, th)
        _count_probe(state, why)
        if why is not None:
            if state.in_service:
                state.out_since = now
            state.in_service = False
            state.reason = why
        elif not state.in_service:
            _maybe_return(state, states, now, th)
    return genesis


def _count_probe(state: NodeState, why: str | None) -> None:
    probe = state.probe
    if probe is None or probe.at == state.judged:
        return
    state.judged = probe.at
    state.good_probes = state.good_probes + 1 if why is None and probe.failure is None else 0


def _maybe_return(state: NodeState, states: Sequence[NodeState], now: float, th: Thresholds) -> None:
    """A good node out of service comes back when the breaker allows (or when it is all a role has)."""
    alone = any(
        not any(o.in_service and o.node.serves(role) for o in states if o is not state) for role in state.node.roles
    )
    wait = 0.0 if state.out_since is None else th.out_at_least_s - (now - state.out_since)
    probes = th.good_probes_back - state.good_probes
    if state.out_since is None or alone or (wait <= 0 and probes <= 0):
        state.in_service, state.reason = True, ""
        state.window.restart(now)  # judged on what it does from now on
        state.totals = Tally()
        return
    more = f"{probes} more good probe{'s' if probes > 1 else ''}"
    left = [f"{wait:.0f} s" if wait > 0 else "", more if probes > 0 else ""]
    state.reason = "recovering: back after " + " and ".join(x for x in left if x)


@dataclass(frozen=True, slots=True)
class NodeView:
    """What every process knows of one node: its settings, whether it serves, and its figures."""

    node: UpstreamNode
    in_service: bool
    reason: str  # why not, when not in service
    cordoned: bool = False
    slots: tuple[int, int, int] | None = None
    heights: tuple[int, int, int] | None = None
    lag: int | None = None
    calls: int = 0
    error_rate: float | None = None
    p50_s: float | None = None
    p99_s: float | None = None
    version: str | None = None

    @property
    def name(self) -> str:
        return self.node.name

    def summary(self) -> dict[str, Any]:
        """For ``gateway status`` and the actor's status: the node by name, never its URLs."""
        return {
            "name": self.node.name,
            "tier": self.node.tier.value,
            "roles": [r.value for r in self.node.roles],
            "state": "in service" if self.in_service else ("cordoned" if self.cordoned else "out"),
            "reason": self.reason,
            "slot": self.slots[0] if self.slots else None,
            "finalized_slot": self.slots[FINALIZED] if self.slots else None,
            "lag": self.lag,
            "calls": self.calls,
            "error_rate": self.error_rate,
            "p50_ms": None if self.p50_s is None else round(self.p50_s * 1000, 2),
            "p99_ms": None if self.p99_s is None else round(self.p99_s * 1000, 2),
            "version": self.version,
        }


@dataclass(frozen=True, slots=True)
class PoolView:
    """The pool as its owner last judged it; ``version`` grows with every judgement."""

    version: int
    nodes: tuple[NodeView, ...]
    genesis: str | None = None

    def serving(self, role: Role) -> list[NodeView]:
        """The nodes in service for ``role``: the primaries, or the fallbacks when no primary is."""
        of_role = [v for v in self.nodes if v.in_service and v.node.serves(role)]
        primaries = [v for v in of_role if v.node.tier is Tier.PRIMARY]
        return primaries or of_role

    def best(self) -> NodeView | None:
        """The node ``/health`` speaks of: the first reads node in service."""
        serving = self.serving(Role.READS)
        return serving[0] if serving else None


def view_of(states: Sequence[NodeState], version: int, genesis: str | None, now: float, th: Thresholds) -> PoolView:
    best = best_slot(states, genesis, now, th)
    nodes = []
    for s in states:
        probe, totals = s.answered, s.totals
        slots = probe.slots if probe is not None else None
        nodes.append(
            NodeView(
                node=s.node,
                in_service=s.in_service,
                reason=s.reason,
                cordoned=s.cordoned is not None,
                slots=slots,
                heights=probe.heights if probe is not None else None,
                lag=None if slots is None or best is None else max(0, best - slots[0]),
                calls=totals.calls,
                error_rate=totals.failed / totals.calls if totals.calls else None,
                p50_s=quantile(totals.latency, 0.5),
                p99_s=quantile(totals.latency, 0.99),
                version=probe.version if probe is not None else None,
            )
        )
    return PoolView(version, tuple(nodes), genesis)

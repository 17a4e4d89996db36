"""One node as a process's pool holds it (:class:`PoolNode`: its client, where it is known to be, what this
process saw of it, its budget of extra calls) and a node's answer (:class:`Answer`), with the rules of which
answers say "ask another node" and which failures say nothing of the node.

Only what a node says of itself counts against it (docs/architecture.md, What counts against a node): its
code for "unhealthy / behind", never the text of a message, which repeats what the caller sent."""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from typing import Any

import orjson

from gateway.core.node_health import NodeView, Tally
from gateway.core.slots import SIZE
from gateway.core.upstreams import UpstreamNode
from gateway.node.http import HttpUpstream, UpstreamBusy, UpstreamTooLarge

#: The node's own answers that mean "ask another node": Agave's NodeUnhealthy (-32005, "Node is unhealthy" or
#: "Node is behind by N slots"), which a node answers to any call while it is unhealthy. Only the code counts:
#: a message may repeat the caller's input (an unknown encoding's name), and -32001, which the interface lists
#: as "node behind", is Agave's cleaned-up block, which any caller's getBlock of an old slot gets. A
#: minContextSlot not reached (-32016) is not one either: the pool asks a node known to be there, or, when none
#: is, the first node, whose answer it is (a caller naming a slot of the future holds nothing and spends no retry).
RETRYABLE_CODES = frozenset({-32005})
#: How long a node this process saw fail is asked last.
SUSPECT_S = 1.0
#: Races in a row a node lost to a hedge before it is asked last too: a hung node loses every one.
OUTRUN_SUSPECT = 3
#: Seconds of a node's budget of extra calls its bucket holds; a caller's share is counted over as long.
BURST_S = 5.0
_UNPARSED: Any = object()


@dataclass(slots=True)
class Answer:
    """A node's answer: its bytes, the node's name (``X-Upstream``), and its JSON when the pool read it."""

    raw: bytes
    node: str | None  # None: a plain ``Upstream`` answered (:class:`gateway.node.nodes.OneNode`)
    doc: Any = _UNPARSED
    retryable: bool = False  # the node's own "unhealthy / behind": another node may do better

    def json(self) -> Any:
        if self.doc is _UNPARSED:
            self.doc = orjson.loads(self.raw)
        return self.doc


class PoolNode:
    """One node as this process uses it: its client, what it is known to be at, what was seen of it."""

    __slots__ = (
        "client",
        "node",
        "ok",
        "outrun",
        "position",
        "refilled",
        "suspect_until",
        "takers",
        "tally",
        "tokens",
        "view",
    )

    def __init__(self, node: UpstreamNode, client: HttpUpstream, tokens: float) -> None:
        self.node = node
        self.client = client
        self.ok = (node.name, "ok")  # the labels of a request answered, built once (every call records them)
        self.view: NodeView | None = None
        #: slots, then block heights, per commitment: the newest its probe or its answers showed
        self.position = [0] * SIZE
        self.suspect_until = 0.0
        self.outrun = 0  # races in a row a hedge to another node won against it
        self.tally = Tally()
        self.tokens = tokens
        self.refilled = time.monotonic()
        #: per caller that asked for extra calls of this node in the last BURST_S: [tokens taken, decayed
        #: over BURST_S; when it last asked], oldest ask first
        self.takers: dict[str, list[float]] = {}

    @property
    def name(self) -> str:
        return self.node.name

    def learn(self, view: NodeView) -> None:
        self.view = view
        if view.slots is None or view.heights is None:
            return
        values = [*view.slots, *view.heights]
        if not view.in_service:  # a node back from out of service may have started over (a resync)
            self.position = values
        else:
            self.position = [max(a, b) for a, b in zip(self.position, values, strict=True)]

    def take_extra(self, rate: float, cost: int = 1, caller: str = "") -> bool:
        """``cost`` tokens (the calls a retry or hedge asks of the node: a batch's items) of this node's
        budget of retries and hedges, for ``caller``, if it has them. While other callers asked for some in
        the last :data:`BURST_S`, a caller gets no more than an even share of the bucket: what it took
        (decaying over :data:`BURST_S`) and ``cost`` within ``BURST_S * rate`` over the callers asking."""
        now = time.monotonic()
        self.tokens = min(BURST_S * rate, self.tokens + (now - self.refilled) * rate)
        self.refilled = now
        takers = self.takers
        mine = takers.pop(caller, None)  # put back last: the dict stays in the order of the callers' last asks
        taken = 0.0 if mine is None else mine[0] * math.exp((mine[1] - now) / BURST_S)
        while takers:  # callers that asked nothing for BURST_S no longer need a share
            oldest = next(iter(takers))
            if now - takers[oldest][1] < BURST_S:
                break
            del takers[oldest]
        granted = self.tokens >= cost and (not takers or taken + cost <= BURST_S * rate / (len(takers) + 1))
        if granted:
            self.tokens -= cost
            taken += cost
        takers[caller] = [taken, now]
        return granted

    def take_tally(self) -> Tally:
        tally, self.tally = self.tally, Tally()
        return tally


def outran(first: PoolNode, by_hedge: bool) -> None:
    """Count the races ``first`` lost to a hedge in a row; a few in a row: asked last for a while."""
    if not by_hedge:
        first.outrun = 0
        return
    first.outrun += 1
    if first.outrun >= OUTRUN_SUSPECT:
        first.outrun = 0
        first.suspect_until = time.monotonic() + SUSPECT_S


def node_trouble(doc: Any) -> bool:
    """Whether the node said it is unhealthy or behind (for the whole call or any call of a batch)."""
    if isinstance(doc, dict):
        return _trouble_of(doc.get("error"))
    if isinstance(doc, list):
        return any(isinstance(a, dict) and _trouble_of(a.get("error")) for a in doc)
    return False


def _trouble_of(error: Any) -> bool:
    return isinstance(error, dict) and error.get("code") in RETRYABLE_CODES


def not_the_nodes(error: BaseException) -> bool:
    """Whether a failure says nothing of the node, and another node would fail the same: an answer over the
    gateway's limit, or this process's budget of answer bytes full (the gateway's own state)."""
    return isinstance(error, (UpstreamTooLarge, UpstreamBusy))

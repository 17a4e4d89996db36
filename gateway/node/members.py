"""One node as a process's pool holds it (:class:`PoolNode`: its client, where it is known to be, what this
process saw of it, its budget of extra calls) and a node's answer (:class:`Answer`), with the rule of which
answers say "ask another node"."""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

import orjson

from gateway.core.node_health import NodeView, Tally
from gateway.core.slots import SIZE
from gateway.core.upstreams import UpstreamNode
from gateway.node.http import HttpUpstream

#: The node's own answers that mean "ask another node": unhealthy or behind (Agave -32005). A
#: minContextSlot not reached (-32016) is not one: the pool asks a node known to be there, or, when none is,
#: the first node, whose answer it is (a caller naming a slot of the future holds nothing and spends no retry).
RETRYABLE_CODES = frozenset({-32005})
#: How long a node this process saw fail is asked last.
SUSPECT_S = 1.0
#: Races in a row a node lost to a hedge before it is asked last too: a hung node loses every one.
OUTRUN_SUSPECT = 3
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

    __slots__ = ("client", "node", "ok", "outrun", "position", "refilled", "suspect_until", "tally", "tokens", "view")

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

    def take_extra(self, rate: float) -> bool:
        """One token of this node's budget of retries and hedges, if it has one."""
        now = time.monotonic()
        self.tokens = min(5 * rate, self.tokens + (now - self.refilled) * rate)
        self.refilled = now
        if self.tokens < 1:
            return False
        self.tokens -= 1
        return True

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
    if not isinstance(error, dict):
        return False
    if error.get("code") in RETRYABLE_CODES:
        return True
    message = str(error.get("message", "")).lower()
    return "node is behind" in message or "node is unhealthy" in message

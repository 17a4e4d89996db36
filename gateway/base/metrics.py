"""The service's metrics, each declared once: name, kind, description, label names and histogram buckets.

Declared here: the metrics several features record (calls, refusals, the node's) and how any is
declared (:func:`counter`, :func:`gauge`, :func:`histogram`); a feature declares its own in its
``<feature>/metrics.py`` with them, importing nothing else (every process imports each such module
before it installs its backend: ``actors/metrics.py``). Code records through the module-level objects
(``REQUESTS.inc(("http", "READ_CHEAP", "200"))``).

Until a backend is installed every record is a no-op, so tests, benches and tools pay nothing. Each
replica and actor process that ``gateway up`` starts installs the Ray backend
(``actors/metrics.py``) when it is built, after declaring every feature's metrics, and Ray's
metrics agent on each node exports what it records for Prometheus; docs/operations.md lists the
metrics, the scrape config and the alerts.

Prometheus conventions: the ``gateway_`` prefix, ``_total`` on counters, seconds as the unit. Label
values come from small fixed sets (transports, method classes, statuses, outcomes), never an account
or an address. A record passes a tuple of label values in the declared order: a backend looks up its
series by that tuple, so the hot path builds nothing more per call.
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, Protocol

Labels = tuple[str, ...]


class Kind(StrEnum):
    COUNTER = "counter"
    GAUGE = "gauge"
    HISTOGRAM = "histogram"


@dataclass(frozen=True, slots=True)
class MetricSpec:
    name: str
    kind: Kind
    description: str
    labels: Labels = ()
    buckets: tuple[float, ...] = ()  # histograms: upper bounds in seconds (or the metric's unit)
    #: Counters: the series exported at zero before their first event (so ``rate()`` and the alerts see
    #: them from the start): every one of an unlabelled counter, the documented label values of others.
    zero: tuple[Labels, ...] = ()


class Sink(Protocol):
    """What a backend gives for one metric: records a value for one series (label values in order)."""

    def record(self, value: float, labels: Labels) -> None: ...


class Backend(Protocol):
    def sink(self, spec: MetricSpec) -> Sink: ...


class _Discard:
    def record(self, value: float, labels: Labels) -> None:
        return None


_DISCARD = _Discard()


class Metric:
    """One declared metric. ``inc`` for counters, ``set`` for gauges, ``observe`` for histograms."""

    __slots__ = ("_sink", "spec")

    def __init__(self, spec: MetricSpec) -> None:
        self.spec = spec
        self._sink: Sink = _DISCARD

    def inc(self, labels: Labels = (), value: float = 1.0) -> None:
        if value > 0:  # a counter only goes up; a zero-credit call adds nothing
            self._sink.record(value, labels)

    def set(self, value: float, labels: Labels = ()) -> None:
        self._sink.record(value, labels)

    def observe(self, value: float, labels: Labels = ()) -> None:
        self._sink.record(value, labels)


REGISTRY: dict[str, Metric] = {}


def _declare(
    name: str,
    kind: Kind,
    description: str,
    labels: Labels = (),
    buckets: Iterable[float] = (),
    zero: Iterable[Labels] = (),
) -> Metric:
    if name in REGISTRY:
        raise ValueError(f"metric {name} declared twice")
    if (kind is Kind.COUNTER) != name.endswith("_total"):
        raise ValueError(f"{name}: counters, and only counters, end in _total")
    if name.endswith(("_bucket_total", "_sum_total", "_count_total")):  # ops/prometheus.yml's histogram rule
        raise ValueError(f"{name}: the scrape config would take it for a histogram's series")
    if "le" in labels:
        raise ValueError(f"{name}: le is the bucket label of a histogram's series")
    zero = tuple(zero)
    if any(len(series) != len(labels) for series in zero):
        raise ValueError(f"{name}: a zero series must name each of {labels}")
    metric = Metric(MetricSpec(name, kind, description, labels, tuple(buckets), zero))
    REGISTRY[name] = metric
    return metric


def counter(name: str, description: str, labels: Labels = (), zero: Iterable[Labels] | None = None) -> Metric:
    """A counter; ``zero``: its series exported at 0 until they move (default: the one of no labels)."""
    return _declare(name, Kind.COUNTER, description, labels, zero=((),) if zero is None and not labels else zero or ())


def each(*values: str) -> tuple[Labels, ...]:
    """The zero series of a one-label counter: one per documented value."""
    return tuple((value,) for value in values)


def gauge(name: str, description: str, labels: Labels = ()) -> Metric:
    return _declare(name, Kind.GAUGE, description, labels)


def histogram(name: str, description: str, buckets: Iterable[float], labels: Labels = ()) -> Metric:
    return _declare(name, Kind.HISTOGRAM, description, labels, buckets)


def install(backend: Backend) -> None:
    """Route every declared metric to ``backend`` (once per process, where it is built)."""
    for metric in REGISTRY.values():
        metric._sink = backend.sink(metric.spec)


def uninstall() -> None:
    for metric in REGISTRY.values():
        metric._sink = _DISCARD


LATENCY_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)

# Calls, on every transport (the pipeline's error boundary; the gRPC service counts its own calls).
REQUESTS = counter(
    "gateway_requests_total",
    "Calls answered, by transport, method class (batch, or none for non-JSON-RPC routes) and HTTP status",
    ("wire", "method_class", "status"),
)
REQUEST_SECONDS = histogram(
    "gateway_request_duration_seconds",
    "Time from the pipeline's first stage to its reply, by transport and method class",
    LATENCY_BUCKETS,
    ("wire", "method_class"),
)
REFUSALS = counter(
    "gateway_refusals_total",
    "Calls refused 402 or 429, by the error's code (INSUFFICIENT_CREDITS, RATE_LIMITED, ...)",
    ("status", "cause"),
)

# The nodes: their JSON-RPC requests, health, PubSub and geyser subscriptions (gateway/node/, the forwarder).
# ``node`` is a node's name in the pool (at most 32, named by the operator), never its address.
UPSTREAM_SECONDS = histogram(
    "gateway_upstream_request_duration_seconds",
    "One JSON-RPC request to a node, by node and outcome (ok, unhealthy, throttled, http, timeout, unavailable, "
    "too_large, cancelled)",
    LATENCY_BUCKETS,
    ("node", "outcome"),
)
UPSTREAM_REPLAYS = counter(
    "gateway_upstream_replays_total",
    "Reads sent to the node once more: it closed their kept-alive connection as they went out",
)
UPSTREAM_RETRIES = counter(
    "gateway_upstream_retries_total", "Reads asked again of another node after one failed, by the node asked", ("node",)
)
UPSTREAM_HEDGES = counter(
    "gateway_upstream_hedges_total",
    "Slow reads asked of a second node too, by that node and whether its answer came first (won) or not (lost)",
    ("node", "result"),
)
UPSTREAM_FAILOVERS = counter(
    "gateway_upstream_failovers_total",
    "Times this process's first choice of node for reads moved, by the node it moved to",
    ("node",),
)
UPSTREAM_BROADCASTS = counter(
    "gateway_upstream_broadcast_sends_total",
    "sendTransaction sent to a node of the pool (every node that serves sends gets each one), by node and outcome "
    "(accepted, refused, failed)",
    ("node", "outcome"),
)
UPSTREAM_UP = gauge("gateway_upstream_up", "1 when the node answered its last health probe, by node", ("node",))
UPSTREAM_IN_SERVICE = gauge("gateway_upstream_in_service", "1 while the node is in service, by node", ("node",))
UPSTREAM_HELD_OUT = gauge(
    "gateway_upstream_held_out",
    "1 while the operator holds the node out of service (cordoned or removed), by node",
    ("node",),
)
UPSTREAM_LAG = gauge(
    "gateway_upstream_lag_slots",
    "How many slots the node's processed slot is behind the pool's best, by node",
    ("node",),
)
UPSTREAM_SERVING = gauge("gateway_upstream_nodes_in_service", "Nodes in service for a role, by role", ("role",))
UPSTREAM_CONFIGURED = gauge("gateway_upstream_nodes", "Nodes of the pool that serve a role, by role", ("role",))
UPSTREAM_FALLBACK = gauge(
    "gateway_upstream_fallback_active", "1 while only fallback nodes serve reads (no primary is in service)"
)
UPSTREAM_STREAM_MOVES = counter(
    "gateway_upstream_stream_moves_total",
    "Times this process's upstream stream (pubsub: /ws; geyser: the gRPC stream) moved to another node, by role "
    "and the node it moved to",
    ("role", "node"),
)
WS_UPSTREAM_SUBSCRIPTIONS = gauge(
    "gateway_ws_upstream_subscriptions",
    "Subscriptions this replica holds at the node's PubSub (one per distinct method and params, shared by clients)",
)
GRPC_UPSTREAM_CONNECTED = gauge(
    "gateway_grpc_upstream_connected", "1 while this gRPC server's subscription to the node's geyser stream is open"
)
GRPC_UPSTREAM_REOPENS = counter(
    "gateway_grpc_upstream_reopens_total",
    "Times this gRPC server's subscription to the node's geyser stream ended and was opened again",
)


def call_class(payload: Any) -> str:
    """The method class label of a call: its one item's class, ``batch``, or ``none`` (not JSON-RPC,
    or refused before parsing)."""
    if payload is None:
        return "none"
    if payload.is_batch:
        return "batch"
    return str(payload.items[0].method_class or "none")


_STATUS = {code: str(code) for code in range(100, 600)}


def call_done(wire: str, payload: Any, status: int, started: float) -> None:
    """Count one answered call and its time since ``started`` (``time.perf_counter``)."""
    method_class = call_class(payload)
    REQUESTS.inc((wire, method_class, _STATUS.get(status) or str(status)))
    REQUEST_SECONDS.observe(time.perf_counter() - started, (wire, method_class))


#: The HTTP status under which ``gateway_requests_total`` counts a gRPC call, by its gRPC status (the
#: usual mapping; CANCELLED, a client that left, as nginx's 499).
GRPC_HTTP_STATUS = {
    "OK": 200,
    "CANCELLED": 499,
    "UNKNOWN": 500,
    "INVALID_ARGUMENT": 400,
    "DEADLINE_EXCEEDED": 504,
    "NOT_FOUND": 404,
    "ALREADY_EXISTS": 409,
    "PERMISSION_DENIED": 403,
    "RESOURCE_EXHAUSTED": 429,
    "FAILED_PRECONDITION": 400,
    "ABORTED": 409,
    "OUT_OF_RANGE": 400,
    "UNIMPLEMENTED": 501,
    "INTERNAL": 500,
    "UNAVAILABLE": 503,
    "DATA_LOSS": 500,
    "UNAUTHENTICATED": 401,
}


def grpc_call_done(method_class: str, code: str | None, started: float) -> None:
    """Count one ended gRPC call (``code``: its status's name, None for OK) under ``wire`` grpc."""
    status = GRPC_HTTP_STATUS.get(code or "OK", 500)
    REQUESTS.inc(("grpc", method_class, _STATUS[status]))
    REQUEST_SECONDS.observe(time.perf_counter() - started, ("grpc", method_class))


def refused(status: int, cause: str) -> None:
    if status in (402, 429):
        REFUSALS.inc((_STATUS[status], cause))

"""The Ray backend of :mod:`gateway.base.metrics`: each declared metric becomes ``ray.util.metrics`` ones,
which Ray's metrics agent on the process's node exports beside Ray's and Serve's own metrics.

Installed in every process ``gateway up`` starts: each ingress replica (``gateway/runtime/ingress.py``) and
each actor (``actors/supervision.py``), when it is built, with every feature's metrics declared first
(:func:`declare_every_metric`). Ray prefixes its metrics' names with ``ray_``; the scrape config of
docs/operations.md (``ops/prometheus.yml``) renames ``ray_gateway_*`` back to ``gateway_*``. In ``actors/``,
not the runtime: the actors install it, and ``actors/`` imports nothing of the runtime.

A histogram is not handed to Ray as a Ray histogram. Ray 2.60's metrics agent records a histogram's
bucket counts again one observation at a time, in Python (about 10 µs of the node's CPU each: two a
call, bench/README.md "Where the replica's and the machine's time goes"), and the process's own record
costs 2-5 µs an observation. Here its buckets are counted in the process and handed to Ray as three
counters, which are Prometheus's own series of a histogram: ``<name>_bucket`` (cumulative, with an
``le`` label), ``<name>_sum`` and ``<name>_count``, one record a series a flush whatever the call rate.
Ray's exporter adds ``_total`` to a counter's name; the scrape config takes it off again.
"""

from __future__ import annotations

import asyncio
import bisect
import contextlib
import importlib
import logging
import threading
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from gateway.base import metrics
from gateway.base.metrics import Kind, Labels, Metric, MetricSpec

log = logging.getLogger(__name__)


#: How often each process hands what it recorded to Ray (Ray's own report to its agent follows).
FLUSH_INTERVAL_S = 1.0
#: The series Ray's counters of one histogram stand for (the scrape config renames them back).
HISTOGRAM_SERIES = ("_bucket", "_sum", "_count")


class RaySink:
    """One metric. A record only adds to this process's pending values (a counter's sum, a gauge's last
    value, a histogram's bucket counts and sum) under a lock; the backend's flush hands them to Ray once
    a second. Ray's record costs about 5 µs a call (it converts the tags each time), too much for every
    call's half dozen records; batched, each series costs one Ray record a second.

    A gauge's every series is handed to Ray again at each flush, changed or not: Ray forgets a gauge
    series not reported for two of its export intervals (20 s by default), and most of ours are set
    only when they change (open sockets, a fallback in use)."""

    __slots__ = ("_bounds", "_gauges", "_kind", "_les", "_lock", "_pending", "_records", "_spec", "_tags")

    def __init__(self, spec: MetricSpec) -> None:
        from ray.util import metrics as ray_metrics

        self._spec = spec
        self._kind = spec.kind
        self._bounds = tuple(spec.buckets)
        #: each bucket's ``le`` label as Ray's own histograms wrote it ("0.005", "1.0", "+Inf")
        self._les = [str(float(bound)) for bound in self._bounds] + ["+Inf"]
        if spec.kind is Kind.HISTOGRAM:
            label_sets = ((*spec.labels, "le"), spec.labels, spec.labels)
            self._records = tuple(
                _record_of(ray_metrics.Counter(spec.name + suffix, spec.description, labels))
                for suffix, labels in zip(HISTOGRAM_SERIES, label_sets, strict=True)
            )
        elif spec.kind is Kind.COUNTER:
            self._records = (_record_of(ray_metrics.Counter(spec.name, spec.description, spec.labels)),)
        else:
            self._records = (_record_of(ray_metrics.Gauge(spec.name, spec.description, spec.labels)),)
        self._tags: dict[Labels, dict[str, str]] = {}
        # a counter's documented series go out at 0 with the first flush (gateway.base.metrics, MetricSpec.zero)
        self._pending: dict[Labels, Any] = dict.fromkeys(spec.zero, 0.0) if spec.kind is Kind.COUNTER else {}
        self._gauges: dict[Labels, float] = {}  # every gauge series' last value (the flusher's own)
        self._lock = threading.Lock()

    def record(self, value: float, labels: Labels) -> None:
        with self._lock:
            if self._kind is Kind.COUNTER:
                self._pending[labels] = self._pending.get(labels, 0.0) + value
            elif self._kind is Kind.GAUGE:
                self._pending[labels] = value
            else:  # [sum, count of each bucket..., count above the last bound]
                counts = self._pending.get(labels)
                if counts is None:
                    counts = self._pending[labels] = [0.0] + [0] * len(self._les)
                counts[0] += value
                counts[1 + bisect.bisect_left(self._bounds, value)] += 1

    def flush(self) -> None:
        """Hands what is pending to Ray: a counter's sums, every gauge series, a histogram's counts."""
        with self._lock:
            pending, self._pending = self._pending, {}
        if None in self._records:
            return
        if self._kind is Kind.HISTOGRAM:
            for labels, counts in pending.items():
                self._hand_histogram(labels, counts)
            return
        if self._kind is Kind.GAUGE:
            self._gauges.update(pending)
            pending = self._gauges
        (record,) = self._records
        for labels, value in pending.items():
            record(value, tags=self._tags_of(labels))

    def _hand_histogram(self, labels: Labels, counts: list[Any]) -> None:
        """One flush's observations of one series: every bucket's cumulative count (all of them, so
        that each ``le`` series exists from the first observation on), the sum and the count."""
        bucket, total, count = self._records
        tags = self._tags_of(labels)
        below = 0
        for le, observed in zip(self._les, counts[1:], strict=True):
            below += observed
            bucket(below, tags={**tags, "le": le})
        total(counts[0], tags=tags)
        count(below, tags=tags)

    def _tags_of(self, labels: Labels) -> dict[str, str]:
        tags = self._tags.get(labels)
        if tags is None:
            if len(labels) != len(self._spec.labels):
                raise ValueError(f"{self._spec.name} takes labels {self._spec.labels}, got {labels}")
            tags = self._tags[labels] = {key: str(val) for key, val in zip(self._spec.labels, labels, strict=True)}
        return tags


def _record_of(metric: Any) -> Any:
    """The Ray metric's record (None: a name Ray discards; it would say so at start)."""
    inner = getattr(metric, "_metric", None)
    return inner.record if inner is not None else None


class RayBackend:
    """Makes the sinks and flushes them every ``interval_s``, on the process's event loop or from a
    daemon thread (:meth:`start`)."""

    def __init__(self, interval_s: float = FLUSH_INTERVAL_S) -> None:
        self.interval_s = interval_s
        self.sinks: list[RaySink] = []
        self._thread = threading.Thread(target=self._run, name="gateway-metrics", daemon=True)
        self._loop: asyncio.AbstractEventLoop | None = None

    def sink(self, spec: MetricSpec) -> RaySink:
        sink = RaySink(spec)
        self.sinks.append(sink)
        return sink

    def start(self, on_loop: bool = True) -> None:
        """Flush on the running event loop when ``on_loop`` and there is one (a replica: built on the
        loop that serves its requests for its whole life), else from a daemon thread. Ray's record
        releases the GIL inside it: from a thread, each one is a GIL handover with the busy loop, and
        a saturated replica spent several times more on the same records (bench/README.md, issue 42)."""
        try:
            self._loop = asyncio.get_running_loop() if on_loop else None
        except RuntimeError:
            self._loop = None
        if self._loop is None:
            self._thread.start()
            return
        self._loop.call_later(self.interval_s, self._tick)

    def _tick(self) -> None:
        self.flush()
        assert self._loop is not None
        self._loop.call_later(self.interval_s, self._tick)

    def flush(self) -> None:
        for sink in self.sinks:
            try:
                sink.flush()
            except Exception:  # one metric's failure never stops the others'
                log.exception("metrics: flushing %s failed", sink._spec.name)

    def _run(self) -> None:
        while True:
            time.sleep(self.interval_s)
            self.flush()


#: gateway/: each feature's metrics module is ``gateway/<feature>/metrics.py`` (this one is the backend).
_GATEWAY = Path(metrics.__file__).parents[1]


def declare_every_metric() -> Mapping[str, Metric]:
    """Every declared metric, the kernel's and each feature's: their modules, found by that name, are
    imported first (they import nothing but :mod:`gateway.base.metrics`). Each process declares them all before
    its backend is installed, however little of the gateway it runs (an actor), so that every process
    exports every metric, a counter's documented series at zero, as when the kernel declared them all."""
    for path in sorted(_GATEWAY.glob("*/metrics.py")):
        if path.parent.name != "runtime":
            importlib.import_module(f"gateway.{path.parent.name}.metrics")
    return metrics.REGISTRY


_installed = False


def install_ray_metrics(on_loop: bool = True) -> RayBackend | None:
    """Route this process's metrics to Ray (idempotent), flushed on the running loop if ``on_loop``
    (:meth:`RayBackend.start`); the backend when installed by this call. A failure leaves them no-ops,
    logged: metrics never stop a replica or an actor from serving."""
    global _installed
    if _installed:
        return None
    try:
        declare_every_metric()
        backend = RayBackend()
        metrics.install(backend)
        backend.start(on_loop)
        _installed = True
    except Exception:
        log.exception("metrics: the Ray backend could not be installed; this process records none")
        with contextlib.suppress(Exception):
            metrics.uninstall()
        return None
    return backend


def with_metrics(cls: type) -> type:
    """``cls`` whose instances install the Ray backend first (an actor's process records from its
    constructor on). Same name, so Ray's log prefix still names the actor's class. An actor flushes
    from the thread: the loop its constructor may run on is not known to outlive it."""

    def __init__(self: Any, *args: Any, **kwargs: Any) -> None:
        install_ray_metrics(on_loop=False)
        cls.__init__(self, *args, **kwargs)  # type: ignore[misc]

    return type(cls.__name__, (cls,), {"__init__": __init__, "__qualname__": cls.__qualname__})

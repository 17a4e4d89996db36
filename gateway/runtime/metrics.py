"""The Ray backend of :mod:`gateway.metrics`: each declared metric becomes a ``ray.util.metrics`` one,
which Ray's metrics agent on the process's node exports beside Ray's and Serve's own metrics.

Installed in every process ``gateway up`` starts: each ingress replica (``ingress.py``) and each actor
(``actors.py``), when it is built. Ray prefixes its metrics' names with ``ray_``; the scrape config of
docs/operations.md (``ops/prometheus.yml``) renames ``ray_gateway_*`` back to ``gateway_*``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import threading
import time
from typing import Any

from gateway import metrics
from gateway.metrics import Kind, Labels, MetricSpec

log = logging.getLogger(__name__)


#: How often each process hands what it recorded to Ray (Ray's own report to its agent follows).
FLUSH_INTERVAL_S = 1.0
#: The most histogram observations handed to Ray in one go on an event loop (about 2 µs each): a flush
#: of a busy second is spread over several turns of the loop, not one pause of every request.
LOOP_SLICE = 256


class RaySink:
    """One Ray metric. A record only adds to this process's pending values (a counter's sum, a
    gauge's last value, a histogram's observations) under a lock; the backend's flush hands them to
    Ray once a second. Ray's record costs about 5 µs a call (it converts the tags each time), too
    much for every call's half dozen records; batched, a counter or gauge costs one Ray record per
    series per second, and a histogram's observations leave the request's path.

    A gauge's every series is handed to Ray again at each flush, changed or not: Ray forgets a gauge
    series not reported for two of its export intervals (20 s by default), and most of ours are set
    only when they change (open sockets, a fallback in use)."""

    __slots__ = ("_gauges", "_kind", "_lock", "_pending", "_record", "_spec", "_tags", "backlog")

    def __init__(self, spec: MetricSpec) -> None:
        from ray.util import metrics as ray_metrics

        self._spec = spec
        self._kind = spec.kind
        metric: Any
        if spec.kind is Kind.COUNTER:
            metric = ray_metrics.Counter(spec.name, spec.description, spec.labels)
        elif spec.kind is Kind.GAUGE:
            metric = ray_metrics.Gauge(spec.name, spec.description, spec.labels)
        else:
            metric = ray_metrics.Histogram(spec.name, spec.description, list(spec.buckets), spec.labels)
        inner = getattr(metric, "_metric", None)  # None: a name Ray discards (it would say so at start)
        self._record = inner.record if inner is not None else None
        self._tags: dict[Labels, dict[str, str]] = {}
        # a counter's documented series go out at 0 with the first flush (gateway.metrics, MetricSpec.zero)
        self._pending: dict[Labels, Any] = dict.fromkeys(spec.zero, 0.0) if spec.kind is Kind.COUNTER else {}
        self._gauges: dict[Labels, float] = {}  # every gauge series' last value (the flusher's own)
        #: a histogram's observations taken from pending and not handed to Ray yet (the flusher's own)
        self.backlog: list[tuple[dict[str, str], list[float]]] = []
        self._lock = threading.Lock()

    def record(self, value: float, labels: Labels) -> None:
        with self._lock:
            if self._kind is Kind.COUNTER:
                self._pending[labels] = self._pending.get(labels, 0.0) + value
            elif self._kind is Kind.GAUGE:
                self._pending[labels] = value
            else:
                observed = self._pending.get(labels)
                if observed is None:
                    self._pending[labels] = [value]
                else:
                    observed.append(value)

    def flush(self, budget: float = math.inf) -> None:
        """Hands what is pending to Ray: a counter's sums, every gauge series, and up to ``budget`` of
        a histogram's observations (the rest wait in ``backlog`` for :meth:`hand`)."""
        with self._lock:
            pending, self._pending = self._pending, {}
        if self._record is None:
            return
        if self._kind is Kind.HISTOGRAM:
            self.backlog.extend((self._tags_of(labels), observed) for labels, observed in pending.items())
            self.hand(budget)
            return
        if self._kind is Kind.GAUGE:
            self._gauges.update(pending)
            pending = self._gauges
        for labels, value in pending.items():
            self._record(value, tags=self._tags_of(labels))

    def hand(self, budget: float) -> int:
        """Hands up to ``budget`` observations of the backlog to Ray; how many it handed."""
        record = self._record
        if record is None:
            return 0
        handed = 0
        while self.backlog and handed < budget:
            tags, observed = self.backlog[-1]
            room = budget - handed
            if len(observed) <= room:
                self.backlog.pop()
                take = observed
            else:
                cut = len(observed) - int(room)
                take, observed[cut:] = observed[cut:], []
            for value in take:
                record(value, tags=tags)
            handed += len(take)
        return handed

    def _tags_of(self, labels: Labels) -> dict[str, str]:
        tags = self._tags.get(labels)
        if tags is None:
            if len(labels) != len(self._spec.labels):
                raise ValueError(f"{self._spec.name} takes labels {self._spec.labels}, got {labels}")
            tags = self._tags[labels] = {key: str(val) for key, val in zip(self._spec.labels, labels, strict=True)}
        return tags


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
        self.flush(budget=0)  # counters and gauges now; histograms' observations to their backlogs
        self._hand_backlog()

    def _hand_backlog(self) -> None:
        """Hands at most ``LOOP_SLICE`` histogram observations to Ray, then yields the loop to requests
        until the backlog is done; the next flush is an interval after it."""
        budget = LOOP_SLICE
        for sink in self.sinks:
            if budget <= 0:
                break
            try:
                budget -= sink.hand(budget)
            except Exception:
                log.exception("metrics: flushing %s failed", sink._spec.name)
        assert self._loop is not None
        if any(sink.backlog for sink in self.sinks):
            self._loop.call_soon(self._hand_backlog)
        else:
            self._loop.call_later(self.interval_s, self._tick)

    def flush(self, budget: float = math.inf) -> None:
        for sink in self.sinks:
            try:
                sink.flush(budget)
            except Exception:  # one metric's failure never stops the others'
                log.exception("metrics: flushing %s failed", sink._spec.name)

    def _run(self) -> None:
        while True:
            time.sleep(self.interval_s)
            self.flush()


_installed = False


def install_ray_metrics(on_loop: bool = True) -> None:
    """Route this process's metrics to Ray (idempotent), flushed on the running loop if ``on_loop``
    (:meth:`RayBackend.start`). A failure leaves them no-ops, logged: metrics never stop a replica or
    an actor from serving."""
    global _installed
    if _installed:
        return
    try:
        backend = RayBackend()
        metrics.install(backend)
        backend.start(on_loop)
        _installed = True
    except Exception:
        log.exception("metrics: the Ray backend could not be installed; this process records none")
        with contextlib.suppress(Exception):
            metrics.uninstall()


def with_metrics(cls: type) -> type:
    """``cls`` whose instances install the Ray backend first (an actor's process records from its
    constructor on). Same name, so Ray's log prefix still names the actor's class. An actor flushes
    from the thread: the loop its constructor may run on is not known to outlive it."""

    def __init__(self: Any, *args: Any, **kwargs: Any) -> None:
        install_ray_metrics(on_loop=False)
        cls.__init__(self, *args, **kwargs)  # type: ignore[misc]

    return type(cls.__name__, (cls,), {"__init__": __init__, "__qualname__": cls.__qualname__})

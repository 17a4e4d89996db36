"""Serve's per-request latency histograms, counted in the ingress replica as the gateway's own are.

Ray Serve 2.60 records each request's latency in two histograms of the replica that serves it
(``serve_deployment_processing_latency_ms`` and, in direct ingress, ``serve_http_request_latency_ms``):
it keeps the latencies for its report every 100 ms, which hands Ray one observation each, and Ray's
metrics agent records each of those again, one at a time (about 7 µs of the node's CPU an observation:
bench/README.md, "Serve's latency histograms"). Here the replica's kept latencies are taken just before
that report reads them and counted into sinks of the same names, buckets and labels
(:class:`actors.metrics.RaySink`: three counters a histogram, one record a series a second);
the scrape config names their series back as the histogram's (ops/prometheus.yml), so a dashboard or
alert on Serve's histograms reads what it read before. Serve's counters and gauges are left to it.

Hand-written over Serve's private ``ReplicaMetricsManager._report_cached_metrics`` and the latencies it
keeps (no setting of Serve turns the histograms off or batches them): ``ray`` is pinned exactly
(requirements.lock), and tests/runtime/test_serve_metrics.py fails if what this reads is renamed.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from actors.metrics import RayBackend, RaySink
from gateway.base.metrics import Kind, Labels, MetricSpec

PROCESSING = "serve_deployment_processing_latency_ms"
#: Serve's ingress latency histogram of a protocol (``RequestIngressMetrics``), and its tag keys.
INGRESS = "serve_{protocol}_request_latency_ms"
INGRESS_LABELS: Labels = ("method", "route", "application", "status_code")

log = logging.getLogger(__name__)


def count_serve_latencies(backend: RayBackend) -> None:
    """Route this replica's Serve latency histograms to ``backend`` (idempotent). Should Serve's parts it
    reads be missing, Serve records its histograms itself, as without it, and the replica serves on."""
    try:
        _count(backend)
    except Exception:
        log.exception("metrics: Serve's latency histograms are left to Serve")


def _count(backend: RayBackend) -> None:
    from ray.serve._private import replica
    from ray.serve._private.constants import REQUEST_LATENCY_BUCKETS_MS

    manager = replica.ReplicaMetricsManager
    report: Callable[[Any], None] = manager._report_cached_metrics
    if getattr(report, "gateway_counted", False):
        return
    buckets = tuple(float(bound) for bound in REQUEST_LATENCY_BUCKETS_MS)
    processing = backend.sink(
        MetricSpec(PROCESSING, Kind.HISTOGRAM, "The latency for queries to be processed.", ("route",), buckets)
    )
    ingress: dict[str, RaySink] = {}

    def ingress_sink(protocol: str) -> RaySink:
        sink = ingress.get(protocol)
        if sink is None:
            name = INGRESS.format(protocol=protocol.lower())
            description = f"The end-to-end latency of {protocol} requests (measured from the Serve ingress)."
            sink = ingress[protocol] = backend.sink(
                MetricSpec(name, Kind.HISTOGRAM, description, INGRESS_LABELS, buckets)
            )
        return sink

    def counted(self: Any) -> None:
        take_latencies(self, processing, ingress_sink)
        report(self)  # Serve's counters and gauges; its histograms find nothing left to observe

    counted.gateway_counted = True  # type: ignore[attr-defined]
    counted.gateway_original = report  # type: ignore[attr-defined]  # Serve's, for the pinned digests
    setattr(manager, "_report_cached_metrics", counted)  # noqa: B010  # a method of Serve's, replaced


def take_latencies(manager: Any, processing: RaySink, ingress_sink: Callable[[str], RaySink]) -> None:
    """Record the latencies a ``ReplicaMetricsManager`` kept since its last report, and forget them."""
    for route, latencies in manager._cached_latencies.items():
        for latency_ms in latencies:
            processing.record(latency_ms, (route,))
    manager._cached_latencies.clear()
    for protocol, series in getattr(manager, "_cached_ingress_processing_latencies", {}).items():
        sink = ingress_sink(str(protocol.value))
        for tags, latencies in series.items():
            named = dict(tags)
            labels = tuple(str(named.get(key, "")) for key in INGRESS_LABELS)
            for latency_ms in latencies:
                sink.record(latency_ms, labels)
        series.clear()

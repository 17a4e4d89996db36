"""Serve's latency histograms counted in the replica (gateway/runtime/serve_metrics.py).

What the module reads of Serve's private ``ReplicaMetricsManager`` is checked against the installed Ray
(pinned exactly: a new Ray that renames it fails here, not silently in production). The counting is
checked on the structures Serve keeps, built here as Serve builds them; Ray's record is replaced by a
list (no Ray instance is needed to build a metric). The export through a real stack and a real
Prometheus, the series' names and a quantile included, is tests/integration/test_prometheus_scrape.py.
"""

from __future__ import annotations

import inspect
from collections import defaultdict, deque
from types import SimpleNamespace
from typing import Any

import pytest
from ray.serve._private import replica
from ray.serve._private.common import RequestProtocol
from ray.serve._private.constants import REQUEST_LATENCY_BUCKETS_MS
from ray.serve._private.request_ingress_metrics import RequestIngressMetrics

from actors.metrics import RayBackend, RaySink
from gateway.base.metrics import Kind, MetricSpec
from gateway.runtime.serve_metrics import INGRESS_LABELS, PROCESSING, count_serve_latencies, take_latencies


def test_what_is_read_of_serve_is_there() -> None:
    manager = replica.ReplicaMetricsManager
    report = inspect.getsource(manager._report_cached_metrics)
    assert "self._cached_latencies.items()" in report
    assert "self._processing_latency_tracker.observe(" in report
    assert "self._cached_ingress_processing_latencies[" in report
    assert "protocol_metrics.processing_latency_tracker.observe(" in report
    recording = inspect.getsource(manager.record_ingress_request_metrics)
    assert "self._cached_ingress_processing_latencies[protocol]" in recording
    for key in INGRESS_LABELS:  # the ingress histogram's tag keys, in the order this module writes them
        assert f'"{key}"' in inspect.getsource(RequestIngressMetrics)


def handed(sink: RaySink) -> list[tuple[float, dict[str, str]]]:
    records: list[tuple[float, dict[str, str]]] = []
    sink._records = tuple(
        (lambda value, tags, series=series: records.append((value, {**tags, "series": series})))
        for series in ("bucket", "sum", "count")
    )
    return records


def test_the_kept_latencies_are_counted_once_and_forgotten(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(replica.ReplicaMetricsManager, "_report_cached_metrics", lambda self: None)
    backend = RayBackend()
    count_serve_latencies(backend)
    count_serve_latencies(backend)  # idempotent: one set of sinks, one wrapper
    (processing,) = backend.sinks
    assert processing._spec.name == PROCESSING
    assert processing._bounds == tuple(float(b) for b in REQUEST_LATENCY_BUCKETS_MS)
    records = handed(processing)

    tags = frozenset({("method", "POST"), ("route", "/"), ("application", "gateway"), ("status_code", "200")})
    kept: Any = SimpleNamespace(
        _cached_latencies=defaultdict(deque, {"/": deque([3.0, 40.0])}),
        _cached_ingress_processing_latencies=defaultdict(
            lambda: defaultdict(deque), {RequestProtocol.HTTP: defaultdict(deque, {tags: deque([5.0])})}
        ),
    )
    report: Any = replica.ReplicaMetricsManager._report_cached_metrics
    report(kept)
    assert not kept._cached_latencies and not kept._cached_ingress_processing_latencies[RequestProtocol.HTTP]
    report(kept)  # nothing new: nothing counted again

    ingress = backend.sinks[1]
    assert ingress._spec.name == "serve_http_request_latency_ms" and ingress._spec.labels == INGRESS_LABELS
    ingress_records = handed(ingress)
    backend.flush()
    counts = [value for value, tags in records if tags["series"] == "count"]
    sums = [value for value, tags in records if tags["series"] == "sum"]
    assert counts == [2] and sums == [43.0]
    assert {tags["route"] for _, tags in records} == {"/"}
    ((count, count_tags),) = [(v, t) for v, t in ingress_records if t["series"] == "count"]
    assert count == 1
    assert {k: count_tags[k] for k in INGRESS_LABELS} == dict(tags)


def test_a_manager_without_ingress_latencies_counts_its_own() -> None:
    processing = RaySink(MetricSpec(PROCESSING, Kind.HISTOGRAM, "test", ("route",), (1.0, 10.0)))
    records = handed(processing)
    kept: Any = SimpleNamespace(_cached_latencies=defaultdict(deque, {"/rpc": deque([1.0])}))
    take_latencies(kept, processing, lambda protocol: pytest.fail(f"no ingress latencies here: {protocol}"))
    processing.flush()
    assert [value for value, tags in records if tags["series"] == "count"] == [1]

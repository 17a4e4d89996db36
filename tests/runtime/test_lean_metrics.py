"""What :class:`gateway.runtime.lean_ingress.Later` hands to Serve is what Serve's own two methods write.

Two of Serve's real ``ReplicaMetricsManager`` objects, their metric structures built as Serve's constructor
builds them with cached metrics on (no Ray instance: the structures are plain Python): one is given each
request through Serve's ``record_request_metrics`` and ``record_ingress_request_metrics``, the other through
a ``Later`` and one hand-over. What Serve's next report would read of them must be the same. Against a
real Serve replica, through HTTP, it is tests/runtime/test_lean_ingress.py.
"""

from __future__ import annotations

from collections import defaultdict, deque
from typing import Any

import pytest
from ray.serve._private.common import RequestProtocol
from ray.serve._private.replica import ReplicaMetricsManager
from ray.serve._private.rolling_window import RollingWindowAccumulator, RollingWindowMax

from gateway.runtime import lean_ingress
from gateway.runtime.lean_ingress import Later

HTTP = RequestProtocol.HTTP
REQUESTS = [("POST", 200, 1.5), ("POST", 200, 0.25), ("GET", 204, 3.0), ("POST", 301, 0.75), ("POST", 200, 9.5)]


def manager() -> Any:
    """A ``ReplicaMetricsManager`` with only the structures the two methods write (as its ``__init__``
    makes them with cached metrics on, in a direct-ingress replica)."""
    made: Any = object.__new__(ReplicaMetricsManager)
    made._cached_metrics_enabled = True
    made._user_code_time_accumulator = RollingWindowAccumulator(window_duration_s=600.0, num_buckets=60)
    made._max_processing_latency_trackers = defaultdict(lambda: RollingWindowMax(window_duration_s=60.0))
    made._cached_latencies = defaultdict(deque)
    made._cached_request_counter = defaultdict(int)
    made._cached_error_counter = defaultdict(int)
    made._cached_ingress_request_counter = defaultdict(lambda: defaultdict(int))
    made._cached_ingress_processing_latencies = defaultdict(lambda: defaultdict(deque))
    made._should_emit_request_ingress_metrics = lambda protocol: True
    return made


def by_serve(requests: list[tuple[str, int, float]]) -> Any:
    served = manager()
    for method, status, latency in requests:
        served.record_request_metrics(route="/", latency_ms=latency, is_error=False)
        served.record_ingress_request_metrics(
            protocol=HTTP,
            method=method,
            route="/",
            app_name="gateway",
            deployment_name="Ingress",
            latency_ms=latency,
            is_error=False,
            status_code=str(status),
        )
    return served


def what_serve_reads(made: Any) -> dict[str, Any]:
    """What ``_report_cached_metrics``, the utilization and the maximum-latency reports read."""
    return {
        "latencies": {route: list(kept) for route, kept in made._cached_latencies.items()},
        "requests": dict(made._cached_request_counter),
        "errors": dict(made._cached_error_counter),
        "ingress": {tags: count for tags, count in made._cached_ingress_request_counter[HTTP].items()},
        "ingress_latencies": {
            tags: list(kept) for tags, kept in made._cached_ingress_processing_latencies[HTTP].items()
        },
        "user_code_ms": made._user_code_time_accumulator.get_total(),
        "max_ms": {route: tracker.get_max() for route, tracker in made._max_processing_latency_trackers.items()},
    }


def test_a_hand_over_writes_what_serves_two_methods_write() -> None:
    kept = manager()
    later = Later(kept, "/", "gateway", ingress=True)
    for request in REQUESTS:
        later.add(*request)
    assert what_serve_reads(kept)["requests"] == {}  # nothing written until the hand-over
    later.hand_over()
    assert later.pending == []
    assert what_serve_reads(kept) == what_serve_reads(by_serve(REQUESTS))
    later.hand_over()  # nothing kept: nothing written twice
    assert what_serve_reads(kept) == what_serve_reads(by_serve(REQUESTS))


def test_without_ingress_metrics_only_the_deployments_are_written() -> None:
    kept = manager()
    later = Later(kept, "/", "gateway", ingress=False)  # HAProxy's metrics count the ingress instead
    for request in REQUESTS:
        later.add(*request)
    later.hand_over()
    read = what_serve_reads(kept)
    assert read["ingress"] == {} and read["ingress_latencies"] == {}
    assert read["requests"] == {"/": len(REQUESTS)}
    assert read["latencies"] == {"/": [latency for _, _, latency in REQUESTS]}


def test_kept_requests_are_handed_over_at_the_bound(monkeypatch: pytest.MonkeyPatch) -> None:
    """Should Serve's report stop running, the list never grows past ``LATER_MAX``."""
    monkeypatch.setattr(lean_ingress, "LATER_MAX", 4)
    kept = manager()
    later = Later(kept, "/", "gateway", ingress=True)
    for request in REQUESTS:
        later.add(*request)
    assert len(later.pending) == 1  # the fourth handed the first four over
    assert what_serve_reads(kept) == what_serve_reads(by_serve(REQUESTS[:4]))

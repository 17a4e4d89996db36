"""The metrics seam (gateway/base/metrics.py): one declaration per metric, no-ops until a backend is
installed, then every record reaches the backend with its labels in declared order."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from actors.metrics import declare_every_metric
from gateway.base import metrics
from gateway.base.metrics import Kind, Labels, MetricSpec
from gateway.core.jsonrpc import parse_payload
from gateway.core.methods import MethodClass


class Recorded:
    def __init__(self, spec: MetricSpec, into: list[tuple[str, float, Labels]]) -> None:
        self.spec, self.into = spec, into

    def record(self, value: float, labels: Labels) -> None:
        assert len(labels) == len(self.spec.labels), (self.spec.name, labels)
        self.into.append((self.spec.name, value, labels))


class Recording:
    def __init__(self) -> None:
        self.records: list[tuple[str, float, Labels]] = []

    def sink(self, spec: MetricSpec) -> Recorded:
        return Recorded(spec, self.records)


@pytest.fixture
def recording() -> Iterator[Recording]:
    backend = Recording()
    metrics.install(backend)
    yield backend
    metrics.uninstall()


def test_names_follow_prometheus_conventions() -> None:
    for name, metric in declare_every_metric().items():  # the features' too
        assert name.startswith("gateway_") and name == metric.spec.name
        assert (metric.spec.kind is Kind.COUNTER) == name.endswith("_total")
        assert (metric.spec.kind is Kind.HISTOGRAM) == bool(metric.spec.buckets)
        assert list(metric.spec.buckets) == sorted(metric.spec.buckets)
        for label in metric.spec.labels:  # never an account or an address
            assert label not in ("pubkey", "account", "address", "api_key", "wallet")


def test_a_name_is_declared_once_and_counters_end_in_total() -> None:
    with pytest.raises(ValueError, match="twice"):
        metrics.counter("gateway_requests_total", "again")
    with pytest.raises(ValueError, match="_total"):
        metrics.counter("gateway_things", "a counter without _total")
    with pytest.raises(ValueError, match="_total"):
        metrics.gauge("gateway_things_total", "a gauge with _total")
    # a histogram reaches Ray as counters <name>_bucket, _sum and _count (actors/metrics.py)
    with pytest.raises(ValueError, match="histogram"):
        metrics.counter("gateway_things_count_total", "renamed by the scrape config as a histogram's")
    with pytest.raises(ValueError, match="le is"):
        metrics.histogram("gateway_things_seconds", "a label of its own named le", (1.0,), ("le",))


def test_nothing_is_recorded_without_a_backend() -> None:
    metrics.REQUESTS.inc(("http", "READ_CHEAP", "200"))  # no backend: a no-op, no error


def test_a_call_is_counted_by_transport_class_and_status(recording: Recording) -> None:
    single = parse_payload(b'{"jsonrpc":"2.0","id":1,"method":"getSlot"}')
    single.items[0].method_class = MethodClass.READ_CHEAP
    batch = parse_payload(b'[{"jsonrpc":"2.0","id":1,"method":"getSlot"},{"jsonrpc":"2.0","id":2,"method":"getSlot"}]')
    metrics.call_done("http", single, 200, 0.0)
    metrics.call_done("ws", batch, 429, 0.0)
    metrics.call_done("mcp", None, 401, 0.0)
    counted = [(labels, value) for name, value, labels in recording.records if name == "gateway_requests_total"]
    assert counted == [
        (("http", "READ_CHEAP", "200"), 1.0),
        (("ws", "batch", "429"), 1.0),
        (("mcp", "none", "401"), 1.0),
    ]
    timed = [labels for name, _, labels in recording.records if name == "gateway_request_duration_seconds"]
    assert timed == [("http", "READ_CHEAP"), ("ws", "batch"), ("mcp", "none")]


def test_refusals_count_402_and_429_only(recording: Recording) -> None:
    metrics.refused(402, "INSUFFICIENT_CREDITS")
    metrics.refused(429, "RATE_LIMITED")
    metrics.refused(400, "INVALID_REQUEST")
    assert [labels for _, _, labels in recording.records] == [("402", "INSUFFICIENT_CREDITS"), ("429", "RATE_LIMITED")]


def test_a_counter_never_records_zero(recording: Recording) -> None:
    metrics.REQUESTS.inc(("http", "READ_CHEAP", "200"), 0)
    metrics.REQUESTS.inc(("http", "READ_CHEAP", "200"), 3)
    assert recording.records == [("gateway_requests_total", 3, ("http", "READ_CHEAP", "200"))]

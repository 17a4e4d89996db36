"""The Ray backend's batching (gateway/runtime/metrics.py): what one flush hands to Ray. Ray's record
is replaced by a list here (no Ray instance is needed to build the metric; the export through Ray's
agent to a real Prometheus is tests/integration/test_metrics.py)."""

from __future__ import annotations

from gateway.metrics import Kind, MetricSpec
from gateway.runtime.metrics import RaySink


def sink_of(kind: Kind, name: str) -> tuple[RaySink, list[tuple[float, dict[str, str]]]]:
    buckets = (0.1, 1.0) if kind is Kind.HISTOGRAM else ()
    sink = RaySink(MetricSpec(name, kind, "test", ("side",), buckets))
    handed: list[tuple[float, dict[str, str]]] = []
    sink._record = lambda value, tags: handed.append((value, tags))
    return sink, handed


def test_every_gauge_series_is_handed_again_at_each_flush() -> None:
    """Ray forgets a gauge series not reported for two export intervals: a socket count set once
    must still be there a minute later."""
    sink, handed = sink_of(Kind.GAUGE, "gateway_test_sockets")
    sink.record(3.0, ("a",))
    sink.record(1.0, ("b",))
    sink.flush()
    sink.record(0.0, ("a",))
    sink.flush()
    sink.flush()
    assert handed == [
        (3.0, {"side": "a"}),
        (1.0, {"side": "b"}),
        (0.0, {"side": "a"}),
        (1.0, {"side": "b"}),
        (0.0, {"side": "a"}),
        (1.0, {"side": "b"}),
    ]


def test_counters_hand_their_sum_once_and_histograms_each_observation() -> None:
    counter, counted = sink_of(Kind.COUNTER, "gateway_test_calls_total")
    for _ in range(3):
        counter.record(2.0, ("a",))
    counter.flush()
    counter.flush()
    assert counted == [(6.0, {"side": "a"})]

    histogram, observed = sink_of(Kind.HISTOGRAM, "gateway_test_seconds")
    histogram.record(0.05, ("a",))
    histogram.record(0.5, ("a",))
    histogram.flush()
    histogram.flush()
    assert observed == [(0.05, {"side": "a"}), (0.5, {"side": "a"})]


def test_a_counters_documented_series_go_out_at_zero_before_any_event() -> None:
    """A documented metric that has had no event is still exported, at 0 (rate() and the alerts see it)."""
    sink = RaySink(MetricSpec("gateway_test_outcomes_total", Kind.COUNTER, "test", ("side",), zero=(("a",), ("b",))))
    handed: list[tuple[float, dict[str, str]]] = []
    sink._record = lambda value, tags: handed.append((value, tags))
    sink.flush()
    sink.record(2.0, ("a",))
    sink.flush()
    assert handed == [(0.0, {"side": "a"}), (0.0, {"side": "b"}), (2.0, {"side": "a"})]


def test_every_unlabelled_counter_and_the_documented_outcomes_are_zero_series() -> None:
    from gateway import metrics

    assert metrics.SETTLE_FAILURES.spec.zero == ((),)
    assert ("lost",) in metrics.WEBHOOK_DELIVERIES.spec.zero and ("unknown",) in metrics.SEND_RACES.spec.zero
    assert all(m.spec.zero == () for m in metrics.REGISTRY.values() if m.spec.kind is not Kind.COUNTER)

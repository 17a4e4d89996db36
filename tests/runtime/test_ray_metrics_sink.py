"""The Ray backend's batching (gateway/runtime/metrics.py): what one flush hands to Ray. Ray's record
is replaced by a list here (no Ray instance is needed to build the metric; the export through Ray's
agent to a real Prometheus is tests/integration/test_prometheus_scrape.py)."""

from __future__ import annotations

import asyncio
import time

from gateway.metrics import Kind, MetricSpec
from gateway.runtime.metrics import LOOP_SLICE, RayBackend, RaySink


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


def test_a_histogram_hands_at_most_its_budget_and_keeps_the_rest_for_later() -> None:
    histogram, observed = sink_of(Kind.HISTOGRAM, "gateway_test_budget_seconds")
    for value in (0.01, 0.02, 0.03):
        histogram.record(value, ("a",))
    histogram.record(0.5, ("b",))
    histogram.flush(budget=0)
    assert observed == [] and histogram.backlog
    assert histogram.hand(2) == 2
    assert histogram.hand(5) == 2
    assert histogram.hand(5) == 0 and not histogram.backlog
    assert sorted((tags["side"], value) for value, tags in observed) == [
        ("a", 0.01),
        ("a", 0.02),
        ("a", 0.03),
        ("b", 0.5),
    ]


def test_on_an_event_loop_the_flush_runs_there_in_slices_and_hands_every_observation() -> None:
    """A replica is built on the loop that serves its requests: the flush runs on that loop (no
    thread), and a busy second's observations go to Ray a slice per turn of the loop."""
    backend = RayBackend(interval_s=0.01)
    histogram = backend.sink(MetricSpec("gateway_test_loop_seconds", Kind.HISTOGRAM, "test", ("side",), (0.1, 1.0)))
    counter = backend.sink(MetricSpec("gateway_test_loop_total", Kind.COUNTER, "test", ("side",)))
    observed: list[float] = []
    counted: list[float] = []
    histogram._record = lambda value, tags: observed.append(value)
    counter._record = lambda value, tags: counted.append(value)
    slices: list[int] = []

    async def run() -> None:
        backend.start()
        for i in range(LOOP_SLICE * 2 + 10):
            histogram.record(i / 1000, ("a",))
        counter.record(3.0, ("a",))
        while len(observed) < LOOP_SLICE * 2 + 10:
            before = len(observed)
            await asyncio.sleep(0)  # one turn of the loop: at most one slice is handed in it
            slices.append(len(observed) - before)

    asyncio.run(asyncio.wait_for(run(), timeout=30))
    assert not backend._thread.is_alive()
    assert sorted(observed) == [i / 1000 for i in range(LOOP_SLICE * 2 + 10)]
    assert counted == [3.0]
    assert max(slices) <= LOOP_SLICE and len([n for n in slices if n]) >= 3


def test_off_the_loop_the_flush_runs_from_its_thread_even_inside_a_loop() -> None:
    """Actors flush from the thread: the loop their constructor may run on is not known to outlive it."""
    backend = RayBackend(interval_s=0.01)
    gauge = backend.sink(MetricSpec("gateway_test_thread_sockets", Kind.GAUGE, "test", ("side",)))
    handed: list[float] = []
    gauge._record = lambda value, tags: handed.append(value)

    async def run() -> None:
        backend.start(on_loop=False)
        gauge.record(2.0, ("a",))

    asyncio.run(run())  # the loop is gone; the thread still hands the gauge to Ray
    assert backend._thread.is_alive()
    deadline = time.monotonic() + 30
    while not handed and time.monotonic() < deadline:
        time.sleep(0.01)
    assert handed[0] == 2.0

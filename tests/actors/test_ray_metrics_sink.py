"""The Ray backend's batching (actors/metrics.py): what one flush hands to Ray. Ray's record
is replaced by a list here (no Ray instance is needed to build the metric; the export through Ray's
agent to a real Prometheus, histograms' quantiles included, is tests/integration/test_prometheus_scrape.py)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

from actors.metrics import RayBackend, RaySink, declare_every_metric
from gateway.base.metrics import Kind, MetricSpec


def sink_of(kind: Kind, name: str) -> tuple[RaySink, list[tuple[float, dict[str, str]]]]:
    buckets = (0.1, 1.0) if kind is Kind.HISTOGRAM else ()
    sink = RaySink(MetricSpec(name, kind, "test", ("side",), buckets))
    handed: list[tuple[float, dict[str, str]]] = []
    sink._records = (lambda value, tags: handed.append((value, tags)),)
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


def test_counters_hand_their_sum_once() -> None:
    counter, counted = sink_of(Kind.COUNTER, "gateway_test_calls_total")
    for _ in range(3):
        counter.record(2.0, ("a",))
    counter.flush()
    counter.flush()
    assert counted == [(6.0, {"side": "a"})]


def histogram_of(name: str) -> tuple[RaySink, list[tuple[str, float, dict[str, str]]]]:
    """A histogram with buckets 0.1 and 1.0 whose three Ray counters record into one list."""
    sink = RaySink(MetricSpec(name, Kind.HISTOGRAM, "test", ("side",), (0.1, 1.0)))
    handed: list[tuple[str, float, dict[str, str]]] = []

    def into(series: str) -> Callable[[float, dict[str, str]], None]:
        return lambda value, tags: handed.append((series, value, tags))

    sink._records = (into("bucket"), into("sum"), into("count"))
    return sink, handed


def test_a_histogram_hands_its_cumulative_buckets_sum_and_count_once_a_flush() -> None:
    """Not one Ray record an observation (Ray's agent would record each again: the module says why)."""
    histogram, handed = histogram_of("gateway_test_seconds")
    for value in (0.05, 0.1, 0.5, 0.7, 3.0):  # 0.1 is in the le="0.1" bucket: le means "at most"
        histogram.record(value, ("a",))
    histogram.record(0.2, ("b",))
    histogram.flush()
    assert handed == [
        ("bucket", 2, {"side": "a", "le": "0.1"}),
        ("bucket", 4, {"side": "a", "le": "1.0"}),
        ("bucket", 5, {"side": "a", "le": "+Inf"}),
        ("sum", 4.35, {"side": "a"}),
        ("count", 5, {"side": "a"}),
        ("bucket", 0, {"side": "b", "le": "0.1"}),  # every bucket series exists from the first observation
        ("bucket", 1, {"side": "b", "le": "1.0"}),
        ("bucket", 1, {"side": "b", "le": "+Inf"}),
        ("sum", 0.2, {"side": "b"}),
        ("count", 1, {"side": "b"}),
    ]
    handed.clear()
    histogram.flush()  # nothing new: nothing handed (Ray's counters keep their totals)
    histogram.record(0.01, ("a",))
    histogram.flush()
    assert [(series, value) for series, value, _ in handed] == [
        ("bucket", 1),
        ("bucket", 1),
        ("bucket", 1),
        ("sum", 0.01),
        ("count", 1),
    ]


def test_a_counters_documented_series_go_out_at_zero_before_any_event() -> None:
    """A documented metric that has had no event is still exported, at 0 (rate() and the alerts see it)."""
    sink = RaySink(MetricSpec("gateway_test_outcomes_total", Kind.COUNTER, "test", ("side",), zero=(("a",), ("b",))))
    handed: list[tuple[float, dict[str, str]]] = []
    sink._records = (lambda value, tags: handed.append((value, tags)),)
    sink.flush()
    sink.record(2.0, ("a",))
    sink.flush()
    assert handed == [(0.0, {"side": "a"}), (0.0, {"side": "b"}), (2.0, {"side": "a"})]


def test_every_unlabelled_counter_and_the_documented_outcomes_are_zero_series() -> None:
    from gateway.credits.metrics import SETTLE_FAILURES
    from gateway.sending.metrics import SEND_RACES
    from gateway.webhooks.metrics import WEBHOOK_DELIVERIES

    assert SETTLE_FAILURES.spec.zero == ((),)
    assert ("lost",) in WEBHOOK_DELIVERIES.spec.zero and ("unknown",) in SEND_RACES.spec.zero
    assert all(m.spec.zero == () for m in declare_every_metric().values() if m.spec.kind is not Kind.COUNTER)


def test_on_an_event_loop_the_flush_runs_there_and_hands_every_observation() -> None:
    """A replica is built on the loop that serves its requests: the flush runs on that loop (no thread)."""
    backend = RayBackend(interval_s=0.01)
    histogram = backend.sink(MetricSpec("gateway_test_loop_seconds", Kind.HISTOGRAM, "test", ("side",), (0.1, 1.0)))
    counter = backend.sink(MetricSpec("gateway_test_loop_total", Kind.COUNTER, "test", ("side",)))
    counts: list[float] = []
    counted: list[float] = []
    flushed = asyncio.Event()

    def count(value: float, tags: dict[str, str]) -> None:
        counts.append(value)
        flushed.set()

    histogram._records = (lambda value, tags: None, lambda value, tags: None, count)
    counter._records = (lambda value, tags: counted.append(value),)

    async def run() -> None:
        backend.start()
        for i in range(1_000):
            histogram.record(i / 1000, ("a",))
        counter.record(3.0, ("a",))
        await flushed.wait()

    asyncio.run(asyncio.wait_for(run(), timeout=30))
    assert not backend._thread.is_alive()
    assert counts == [1_000] and counted == [3.0]


def test_off_the_loop_the_flush_runs_from_its_thread_even_inside_a_loop() -> None:
    """Actors flush from the thread: the loop their constructor may run on is not known to outlive it."""
    backend = RayBackend(interval_s=0.01)
    gauge = backend.sink(MetricSpec("gateway_test_thread_sockets", Kind.GAUGE, "test", ("side",)))
    handed: list[float] = []
    gauge._records = (lambda value, tags: handed.append(value),)

    async def run() -> None:
        backend.start(on_loop=False)
        gauge.record(2.0, ("a",))

    asyncio.run(run())  # the loop is gone; the thread still hands the gauge to Ray
    assert backend._thread.is_alive()
    deadline = time.monotonic() + 30
    while not handed and time.monotonic() < deadline:
        time.sleep(0.01)
    assert handed[0] == 2.0

"""A metrics backend that keeps the gateway's records in memory (the export through Ray is tested in
tests/integration), for tests that count what a part recorded."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager

from gateway.base import metrics


class Recorded:
    """The sum of each metric's records, by name and labels (a counter's increments)."""

    def __init__(self) -> None:
        self.counts: Counter[tuple[str, tuple[str, ...]]] = Counter()

    def sink(self, spec: metrics.MetricSpec) -> Recorded.Sink:
        return Recorded.Sink(self, spec.name)

    class Sink:
        def __init__(self, owner: Recorded, name: str) -> None:
            self.owner, self.name = owner, name

        def record(self, value: float, labels: tuple[str, ...]) -> None:
            self.owner.counts[(self.name, labels)] += int(value)


@contextmanager
def recording() -> Iterator[Recorded]:
    """The gateway's metrics recorded in memory for the block, then no backend again."""
    backend = Recorded()
    metrics.install(backend)
    try:
        yield backend
    finally:
        metrics.uninstall()

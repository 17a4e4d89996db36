"""The Ray backend of :mod:`gateway.metrics`: each declared metric becomes a ``ray.util.metrics`` one,
which Ray's metrics agent on the process's node exports beside Ray's and Serve's own metrics.

Installed in every process ``gateway up`` starts: each ingress replica (``ingress.py``) and each actor
(``actors.py``), when it is built. Ray prefixes its metrics' names with ``ray_``; the scrape config of
docs/operations.md (``ops/prometheus.yml``) renames ``ray_gateway_*`` back to ``gateway_*``.
"""

from __future__ import annotations

import contextlib
import logging
from typing import Any

from gateway import metrics
from gateway.metrics import Kind, Labels, MetricSpec

log = logging.getLogger(__name__)


class RaySink:
    """One Ray metric. A record goes straight to Ray's recorder with the series' tags, a dict built
    once per label tuple (the label sets are small), skipping the per-call checks of
    ``ray.util.metrics`` (the tags were checked when the series' dict was built)."""

    __slots__ = ("_metric", "_record", "_spec", "_tags")

    def __init__(self, spec: MetricSpec) -> None:
        from ray.util import metrics as ray_metrics

        self._spec = spec
        metric: Any
        if spec.kind is Kind.COUNTER:
            metric = ray_metrics.Counter(spec.name, spec.description, spec.labels)
        elif spec.kind is Kind.GAUGE:
            metric = ray_metrics.Gauge(spec.name, spec.description, spec.labels)
        else:
            metric = ray_metrics.Histogram(spec.name, spec.description, list(spec.buckets), spec.labels)
        self._metric = metric
        inner = getattr(metric, "_metric", None)
        self._record = inner.record if inner is not None else None
        self._tags: dict[Labels, dict[str, str]] = {}

    def record(self, value: float, labels: Labels) -> None:
        tags = self._tags.get(labels)
        if tags is None:
            if len(labels) != len(self._spec.labels):
                raise ValueError(f"{self._spec.name} takes labels {self._spec.labels}, got {labels}")
            tags = self._tags[labels] = {key: str(val) for key, val in zip(self._spec.labels, labels, strict=True)}
        if self._record is not None:
            self._record(value, tags=tags)


class RayBackend:
    def sink(self, spec: MetricSpec) -> RaySink:
        return RaySink(spec)


_installed = False


def install_ray_metrics() -> None:
    """Route this process's metrics to Ray (idempotent). A failure leaves them no-ops, logged: metrics
    never stop a replica or an actor from serving."""
    global _installed
    if _installed:
        return
    try:
        metrics.install(RayBackend())
        _installed = True
    except Exception:
        log.exception("metrics: the Ray backend could not be installed; this process records none")
        with contextlib.suppress(Exception):
            metrics.uninstall()


def with_metrics(cls: type) -> type:
    """``cls`` whose instances install the Ray backend first (an actor's process records from its
    constructor on). Same name, so Ray's log prefix still names the actor's class."""

    def __init__(self: Any, *args: Any, **kwargs: Any) -> None:
        install_ray_metrics()
        cls.__init__(self, *args, **kwargs)  # type: ignore[misc]

    return type(cls.__name__, (cls,), {"__init__": __init__, "__qualname__": cls.__qualname__})

"""The limits' metrics: a process's exchanges with the account shards (its slices).

Declared with the kernel's :mod:`gateway.metrics` (which installs every declared metric) and importing
nothing else: every process declares them before it installs its backend, an actor's too
(``gateway/runtime/metrics.py``). Names and labels are docs/operations.md's.
"""

from __future__ import annotations

from gateway.metrics import LATENCY_BUCKETS, counter, each, histogram

SLICE_EXCHANGES = counter(
    "gateway_account_slice_exchanges_total",
    "A replica's exchanges with an account shard (rate and concurrency slices), by result (answered, unavailable)",
    ("result",),
    each("answered", "unavailable"),
)

SLICE_SECONDS = histogram(
    "gateway_account_slice_exchange_duration_seconds",
    "One exchange with an account shard, answered or not",
    LATENCY_BUCKETS,
)

"""The limits' metrics: a process's exchanges with the account shards (its slices)."""

from __future__ import annotations

from gateway.base.metrics import LATENCY_BUCKETS, counter, each, histogram

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

"""Credits' metrics: what metering charged and refunded, the leases, the recalls and the settles (the
metering stage, the meter, the lease keeper), and the deposit watcher's (its last poll, the x402 fee
payer's SOL it reads).
"""

from __future__ import annotations

from gateway.base.metrics import LATENCY_BUCKETS, counter, each, gauge, histogram

CREDITS = counter(
    "gateway_credits_total",
    "Credits of admitted JSON-RPC items, by method class and outcome (charged, refunded)",
    ("method_class", "outcome"),
)

LEASES = counter(
    "gateway_credit_lease_requests_total",
    "Credit lease requests answered by the ledger, by result (granted, empty, no_account)",
    ("result",),
    each("granted", "empty", "no_account"),
)

RECALLS = counter(
    "gateway_credit_recalls_total",
    "Credits asked back from other replicas' leases by a call short of credits, by result (returned, nothing)",
    ("result",),
    each("returned", "nothing"),
)

SETTLE_SECONDS = histogram(
    "gateway_credit_settle_duration_seconds", "One lease settle (usage written, lease renewed)", LATENCY_BUCKETS
)

SETTLE_FAILURES = counter("gateway_credit_settle_failures_total", "Flushes of an account's usage that failed")

FEE_PAYER_LAMPORTS = gauge("gateway_x402_fee_payer_lamports", "SOL of the x402 fee payer, in lamports")

DEPOSIT_POLLED = gauge(
    "gateway_deposit_watcher_last_poll_timestamp_seconds",
    "Unix time of the deposit watcher's last poll that read the deposit account",
)

"""The credit ledger in PostgreSQL: leases, settlement, expiry and the conservation audit.

Tables: ``ledger_entries`` (append-only), ``credit_batches``, ``credit_leases``, ``usage_history``,
and the ``balance`` / ``total_consumed`` columns of ``accounts``. Every operation is one transaction
that first locks the account row (``SELECT ... FOR UPDATE``), so replicas, deposit crediting and
expiry serialise per account. The balance column moves only together with a ledger entry, and
batches move with it, so at commit:

    balance == sum(ledger amounts) == sum(batch remainders) >= sum(live lease holds)

Every charge (a lease's settlement, a send's, a webhook delivery's) and the refund of one go through
the one primitive of :mod:`gateway.storage.ledger.moves`; deposits and expiry add and retire batches.

The webhook jobs of the lifecycle events they cause (``low_balance``, ``credits.expiring``) are written
in the same transaction (:mod:`gateway.storage.webhook_events`); the in-process hooks fire after
commit and never fail the operation (:func:`gateway.core.credits.fire`).
"""

from __future__ import annotations

from gateway.storage.ledger.audit import check_conservation
from gateway.storage.ledger.expiry import expire_due
from gateway.storage.ledger.leases import OverspendError, grant_size, lease, settle
from gateway.storage.ledger.sql import balance
from gateway.storage.ledger.usage import purge_usage

__all__ = [
    "OverspendError",
    "balance",
    "check_conservation",
    "expire_due",
    "grant_size",
    "lease",
    "purge_usage",
    "settle",
]

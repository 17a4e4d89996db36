"""Credits: the ledger in PostgreSQL (store), replica-local leases (meter), the metering stage.

The deposit contract other parts code against::

    from gateway.credits import CreditPolicy, DepositCredit, DepositOutcome, credit_deposit
"""

from __future__ import annotations

from gateway.credits.model import CreditPolicy, DepositCredit, DepositOutcome, EventHook, UsageRecord
from gateway.credits.store import balance, credit_deposit

__all__ = [
    "CreditPolicy",
    "DepositCredit",
    "DepositOutcome",
    "EventHook",
    "UsageRecord",
    "balance",
    "credit_deposit",
]

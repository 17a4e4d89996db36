"""The daily spend cap in the ledger's transactions (docs/api.md, "Spend cap"): what the account may
still spend today, read from its locked row (:func:`gateway.storage.ledger.sql.lock_account`).

The day is the calendar day in UTC of the database's clock. A charge counts on the day its debit is
written (a lease's calls at its settlement, about a second after them). A lease and a send's hold
are granted no more than the cap leaves (less what live leases and pending sends already hold), so the
credits spent in a day never pass the cap: every spend is a debit of a lease's usage, of a send's
hold, or of a webhook delivery checked here first.

The cap's other rules are :mod:`gateway.access.spend_cap`'s; these stay here, inside the transactions
that apply them, because storage is below access in the layers contract (pyproject.toml).
"""

from __future__ import annotations

import asyncpg

#: What the ``accounts`` row's day columns become when a debit of ``$3`` credits is written (in SQL).
SPENT_AFTER_DEBIT = """spent_on_day = CASE WHEN spend_day = (now() AT TIME ZONE 'UTC')::date
                                      THEN spent_on_day + $3 ELSE $3 END,
                  spend_day = (now() AT TIME ZONE 'UTC')::date"""
#: ... and when a refund of ``$3`` credits is written: today's spending falls (never below 0).
SPENT_AFTER_REFUND = """spent_on_day = CASE WHEN spend_day = (now() AT TIME ZONE 'UTC')::date
                                      THEN GREATEST(0, spent_on_day - $3) ELSE spent_on_day END"""


def spent_today(account: asyncpg.Record) -> int:
    """Credits the account's debits took today (UTC), as its locked row says."""
    return int(account["spent_on_day"]) if account["spend_day"] == account["today"] else 0


def room(account: asyncpg.Record, held: int) -> int | None:
    """What the cap leaves to spend today beyond ``held`` (live leases' and pending sends' holds); None
    without a cap."""
    cap = account["daily_spend_cap"]
    if cap is None:
        return None
    return max(0, int(cap) - spent_today(account) - held)

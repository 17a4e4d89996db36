"""Balances for the account routes (``GET /account/info``), read from the store and this replica.

Implements the auth package's ``BalanceSource`` protocol. Reading ``accounts.balance`` is one
indexed row (not a ledger sum); this replica's own usage not yet flushed is taken off, so a caller
sees their latest calls. Other replicas' unflushed usage shows up within one flush interval.
"""

from __future__ import annotations

from typing import Any

from gateway.credits.meter import Meter


class StoreBalanceSource:
    """Built before start-up with the replica's meter; reads through the meter's pool once started."""

    def __init__(self, meter: Meter) -> None:
        self.meter = meter

    async def balance(self, pubkey: str) -> int:
        value: Any = await self.meter.pool.fetchval("SELECT balance FROM accounts WHERE pubkey = $1", pubkey)
        return max(0, int(value or 0) - self.meter.unsettled(pubkey))

    async def total_consumed(self, pubkey: str) -> int:
        value: Any = await self.meter.pool.fetchval("SELECT total_consumed FROM accounts WHERE pubkey = $1", pubkey)
        return int(value or 0) + max(0, self.meter.unsettled(pubkey))

"""How many WebSockets may be open: per replica, per client address and per account.

Every open socket holds one of the replica's request slots for its whole life, so without caps one
caller could hold them all and leave none for HTTP calls (``max_ongoing_requests`` is kept at least
``ws_max_connections`` + 256 for that reason: docs/api.md, WebSocket limits). The per-replica cap is
this replica's own. The per-address and per-account caps are the service's, counted over every
replica by :mod:`gateway.storage.seats` (Redis); in a process without Redis each of R replicas allows
``ceil(cap / R)`` of them instead.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from enum import Enum

from gateway.pubsub import metrics
from gateway.storage.seats import Seat, Seats


class Refusal(Enum):
    REPLICA_FULL = "replica"
    ADDRESS_FULL = "address"


@dataclass
class SocketCaps:
    per_replica: int
    address_cap: int  # the service's
    account_cap: int  # the service's
    replicas: int = 1
    seats: Seats = field(default_factory=Seats)
    total: int = 0

    @property
    def per_address(self) -> int:
        return self.address_cap if self.seats.shared else math.ceil(self.address_cap / self.replicas)

    @property
    def per_account(self) -> int:
        return self.account_cap if self.seats.shared else math.ceil(self.account_cap / self.replicas)

    async def open(self, address: str) -> Refusal | Seat:
        """Count a new socket from ``address``, or say why not (nothing is counted then). Raises
        ``StoreUnavailable`` when the seats cannot be counted."""
        if self.total >= self.per_replica:
            return Refusal.REPLICA_FULL
        self.total += 1  # before the await: sockets opening together cannot pass the replica's cap
        seat: Seat | None = None
        try:
            seat = await self.seats.take(f"seats:ws:address:{address}", self.per_address)
        finally:
            if seat is None:
                self.total -= 1
            metrics.WS_CONNECTIONS.set(self.total)
        return seat if seat is not None else Refusal.ADDRESS_FULL

    async def close(self, seat: Seat) -> None:
        self.total -= 1
        metrics.WS_CONNECTIONS.set(self.total)
        await self.seats.give(seat)

    async def join(self, pubkey: str) -> Seat | None:
        """A seat for an authenticated socket of ``pubkey``; None at the account's cap."""
        return await self.seats.take(f"seats:ws:account:{pubkey}", self.per_account)

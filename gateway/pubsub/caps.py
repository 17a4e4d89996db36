"""How many WebSockets one replica holds open: in all, per client address and per account.

Every open socket holds one of the replica's request slots for its whole life, so without caps one
caller could hold them all and leave none for HTTP calls (``max_ongoing_requests`` is kept at least
``ws_max_connections`` + 256 for that reason: docs/api.md, WebSocket limits). The per-address and
per-account caps are the service's, shared out like the other replica-local limits: each of R
replicas allows ``ceil(cap / R)``. Soft state: a replica that restarts has no sockets left to count.
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass, field
from enum import Enum

from gateway import metrics


class Refusal(Enum):
    REPLICA_FULL = "replica"
    ADDRESS_FULL = "address"


@dataclass
class SocketCaps:
    per_replica: int
    per_address: int
    per_account: int
    total: int = 0
    _addresses: Counter[str] = field(default_factory=Counter)
    _accounts: Counter[str] = field(default_factory=Counter)

    @classmethod
    def shared(cls, per_replica: int, per_address: int, per_account: int, replicas: int) -> SocketCaps:
        """Caps for one of ``replicas`` replicas, the per-address and per-account ones shared out."""
        return cls(per_replica, math.ceil(per_address / replicas), math.ceil(per_account / replicas))

    def open(self, address: str) -> Refusal | None:
        """Count a new socket from ``address``, or say why not (nothing is counted then)."""
        if self.total >= self.per_replica:
            return Refusal.REPLICA_FULL
        if self._addresses[address] >= self.per_address:
            return Refusal.ADDRESS_FULL
        self.total += 1
        self._addresses[address] += 1
        metrics.WS_CONNECTIONS.set(self.total)
        return None

    def close(self, address: str) -> None:
        self.total -= 1
        _drop(self._addresses, address)
        metrics.WS_CONNECTIONS.set(self.total)

    def join(self, pubkey: str) -> bool:
        """Count an authenticated socket for ``pubkey``; False (nothing counted) at the account's cap."""
        if self._accounts[pubkey] >= self.per_account:
            return False
        self._accounts[pubkey] += 1
        return True

    def leave(self, pubkey: str) -> None:
        _drop(self._accounts, pubkey)


def _drop(counts: Counter[str], key: str) -> None:
    counts[key] -= 1
    if counts[key] <= 0:
        del counts[key]

"""What one CSV export holds while it streams (docs/api.md, CSV exports).

An export reads pages of the account's rows for up to ``EXPORT_MAX_SECONDS``. Two bounds keep one
tenant's exports from taking what every caller shares, and its credential in charge:

- a seat of the account's ``EXPORTS_PER_ACCOUNT``, counted over the whole service
  (:mod:`gateway.storage.seats`, as open WebSockets are): the per-address rate of the account reads
  alone would let one address run hundreds at once, each reading the database for two minutes;
- the credential it was asked with, held for revocation (:mod:`gateway.auth.revocations`): a rotated
  API key or a logged-out session stops it at its next page, as it ends a socket. An account's
  suspension does not: reading the account stays open to a suspended one (docs/api.md).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable

from gateway.auth.revocations import Credential, Revocations
from gateway.core.errors import ProxyError, RpcCode
from gateway.storage.seats import Seat, Seats

#: Exports of one account streaming at once, over every replica.
EXPORTS_PER_ACCOUNT = 2


def seat_key(pubkey: str) -> str:
    """The Redis key of the account's export seats."""
    return f"seats:export:account:{pubkey}"


def exports_busy() -> ProxyError:
    return ProxyError(
        429,
        "CONCURRENCY_LIMITED",
        f"concurrency limit exceeded: {EXPORTS_PER_ACCOUNT} CSV exports of this account are already running",
        RpcCode.RATE_LIMITED,
        {"concurrency_limit": EXPORTS_PER_ACCOUNT, "retry_after_secs": 1},
        headers={"Retry-After": "1"},
    )


class Export:
    """One export's seat and credential hold, given back once: by :meth:`end` when its body ends (whole or
    cut), else by :meth:`close` when the answer is over (a body never started)."""

    def __init__(self, seats: Seats, seat: Seat) -> None:
        self._seats = seats
        self._seat: Seat | None = seat
        self._unhold: Callable[[], None] | None = None
        #: Why the export must stop (its credential was revoked); None while it may go on.
        self.stopped: str | None = None

    def _revoked(self, reason: str) -> None:
        self.stopped = reason

    def close(self) -> None:
        seat, self._seat = self._seat, None
        if seat is not None:
            self._seats.release(seat)
        self._release_hold()

    async def end(self) -> None:
        """:meth:`close`, awaiting the seat's removal at Redis: called before the answer's last chunk
        goes out, so a client that read the whole file finds the seat free."""
        seat, self._seat = self._seat, None
        self._release_hold()
        if seat is not None:
            await self._seats.give(seat)

    def _release_hold(self) -> None:
        unhold, self._unhold = self._unhold, None
        if unhold is not None:
            unhold()


async def ending(chunks: AsyncIterator[bytes], export: Export) -> AsyncIterator[bytes]:
    """``chunks``, then :meth:`Export.end` once they are out (or stop: cut by the client)."""
    try:
        async for chunk in chunks:
            yield chunk
    finally:
        await export.end()


async def open_export(seats: Seats, revocations: Revocations, pubkey: str, credential: Credential | None) -> Export:
    """The account's export seat and a hold of ``credential`` (None: a wallet's signature, nothing to
    revoke). Raises :func:`exports_busy` when the account's seats are taken, ``StoreUnavailable`` when
    they cannot be counted (never run uncounted)."""
    seat = await seats.take(seat_key(pubkey), EXPORTS_PER_ACCOUNT)
    if seat is None:
        raise exports_busy()
    export = Export(seats, seat)
    if credential is not None:
        # Authenticated by the stages before this hold: re-checked now, a revocation may fall between.
        export._unhold = revocations.hold(credential, export._revoked, None)
    return export

"""An account's overrides of the gRPC stream limits (migration 0021), set by an operator for a heavy consumer
(``gateway account limits --streams/--stream-opens/--address-streams``, docs/operations.md) and read by a gRPC
server process at every stream open, so that a change holds on every process from the account's next open.

Each is None where the account takes the settings' default: ``grpc_max_streams_per_account``,
``grpc_max_stream_opens_per_minute`` and ``grpc_max_streams_per_address`` (the last as the cap of the
client address the account's stream comes from: other accounts' streams from that address keep the default).
"""

from __future__ import annotations

from dataclasses import dataclass

import asyncpg

from gateway.storage.errors import postgres_errors

COLUMNS = ("grpc_max_streams", "grpc_max_opens_per_minute", "grpc_max_streams_per_address")


@dataclass(frozen=True, slots=True)
class StreamOverrides:
    streams: int | None = None  # open at once over the service
    opens_per_minute: int | None = None
    address_streams: int | None = None  # open from the stream's client address, the account's stream included

    @classmethod
    def of(cls, row: asyncpg.Record) -> StreamOverrides:
        return cls(*(row[column] for column in COLUMNS))

    def as_dict(self) -> dict[str, int | None]:
        return dict(zip(COLUMNS, (self.streams, self.opens_per_minute, self.address_streams), strict=True))

    @property
    def none(self) -> bool:
        return self == StreamOverrides()


class AccountStreamLimits:
    """The accounts' overrides as a gRPC server reads them; until :meth:`start` gives it PostgreSQL (a process
    started without one, as some tests run), none."""

    def __init__(self) -> None:
        self._pool: asyncpg.Pool | None = None

    def start(self, pool: asyncpg.Pool) -> None:
        self._pool = pool

    async def of(self, pubkey: str) -> StreamOverrides:
        """The account's overrides (none for an account not found); ``StoreUnavailable`` when they cannot be read."""
        if self._pool is None:
            return StreamOverrides()
        async with postgres_errors("the account's stream limits"):
            row = await self._pool.fetchrow(f"SELECT {', '.join(COLUMNS)} FROM accounts WHERE pubkey = $1", pubkey)
        return StreamOverrides() if row is None else StreamOverrides.of(row)


async def write_stream_overrides(conn: asyncpg.Connection, pubkey: str, overrides: StreamOverrides) -> None:
    """Set them (in the caller's transaction, the account's row locked)."""
    await conn.execute(
        f"UPDATE accounts SET {', '.join(f'{c} = ${n}' for n, c in enumerate(COLUMNS, 2))} WHERE pubkey = $1",
        pubkey,
        overrides.streams,
        overrides.opens_per_minute,
        overrides.address_streams,
    )

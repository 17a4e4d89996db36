"""How the auth stores tell "the database is down" (503, retry) from a bug (500)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import asyncpg
from asyncpg import exceptions as pg_errors

from gateway.auth.errors import database_unavailable

DB_UNAVAILABLE: tuple[type[BaseException], ...] = (
    asyncpg.PostgresConnectionError,
    asyncpg.InterfaceError,
    pg_errors.OperatorInterventionError,  # admin shutdown, cannot connect now
    pg_errors.InsufficientResourcesError,  # too many connections
    OSError,
    TimeoutError,
)


@asynccontextmanager
async def db_errors() -> AsyncIterator[None]:
    """Re-raise an unreachable or overloaded database as 503 SERVICE_TEMPORARILY_UNAVAILABLE."""
    try:
        yield
    except DB_UNAVAILABLE as exc:
        raise database_unavailable() from exc

"""The storage boundary's one failure: a store that cannot be reached or cannot serve right now.

PostgreSQL's and Redis's client exceptions meaning "unreachable, shutting down, overloaded, try
again" become :class:`StoreUnavailable` here, the way :mod:`gateway.node.http` maps the node's
transport errors, so nothing above storage catches a driver exception. The pipeline's error
boundary answers it with 503 and a retry hint. A query that is wrong (a bug, a violated
constraint) is not mapped: it stays an internal error.
"""

from __future__ import annotations

import functools
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import ParamSpec, TypeVar

import asyncpg
from asyncpg import exceptions as pg_errors
from redis.exceptions import RedisError

P = ParamSpec("P")
T = TypeVar("T")

#: PostgreSQL failures a retry can cure. Serialization failures and deadlocks are among them: the
#: transaction was rolled back whole.
POSTGRES_UNAVAILABLE: tuple[type[BaseException], ...] = (
    asyncpg.PostgresConnectionError,
    asyncpg.InterfaceError,
    asyncpg.InternalClientError,  # a connection whose backend was terminated mid-operation (tests/faults)
    pg_errors.OperatorInterventionError,  # admin shutdown, cannot connect now
    pg_errors.InsufficientResourcesError,  # too many connections, disk full
    pg_errors.TransactionRollbackError,  # serialization failure, deadlock
    pg_errors.QueryCanceledError,  # statement timeout
    OSError,
    TimeoutError,
)
REDIS_UNAVAILABLE: tuple[type[BaseException], ...] = (RedisError, OSError, TimeoutError)


class StoreUnavailable(Exception):
    """``what`` (e.g. "the credit ledger") cannot be used right now; retrying later may succeed."""

    def __init__(self, what: str) -> None:
        super().__init__(f"{what} is unavailable")
        self.what = what


@asynccontextmanager
async def postgres_errors(what: str) -> AsyncIterator[None]:
    try:
        yield
    except POSTGRES_UNAVAILABLE as exc:
        raise StoreUnavailable(what) from exc


@asynccontextmanager
async def redis_errors(what: str) -> AsyncIterator[None]:
    try:
        yield
    except REDIS_UNAVAILABLE as exc:
        raise StoreUnavailable(what) from exc


def postgres_call(what: str) -> Callable[[Callable[P, Awaitable[T]]], Callable[P, Awaitable[T]]]:
    """Decorate a coroutine function of the storage layer: its driver failures become ``StoreUnavailable(what)``."""

    def decorate(fn: Callable[P, Awaitable[T]]) -> Callable[P, Awaitable[T]]:
        @functools.wraps(fn)
        async def wrapped(*args: P.args, **kwargs: P.kwargs) -> T:
            try:
                return await fn(*args, **kwargs)
            except POSTGRES_UNAVAILABLE as exc:
                raise StoreUnavailable(what) from exc

        return wrapped

    return decorate

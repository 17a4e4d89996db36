"""Which PostgreSQL driver errors are an outage of the store (503, retry) rather than a bug (500)."""

from __future__ import annotations

import asyncpg
import pytest

from gateway.storage.errors import StoreUnavailable, postgres_errors


@pytest.mark.parametrize(
    "error",
    [
        asyncpg.PostgresConnectionError("connection lost"),
        asyncpg.InterfaceError("connection is closed"),
        # what asyncpg raises on a connection whose backend was terminated mid-operation (found by
        # tests/faults/ledger_run.py): the statement did not commit, so it is an outage like the others
        asyncpg.InternalClientError("cannot switch to state 15; another operation (2) is in progress"),
        ConnectionResetError("reset by peer"),
    ],
)
async def test_a_broken_connection_is_the_store_unavailable(error: Exception) -> None:
    with pytest.raises(StoreUnavailable, match="the credit ledger is unavailable"):
        async with postgres_errors("the credit ledger"):
            raise error


async def test_a_query_bug_is_not_an_outage() -> None:
    with pytest.raises(asyncpg.UndefinedColumnError):
        async with postgres_errors("the credit ledger"):
            raise asyncpg.UndefinedColumnError("column nope does not exist")

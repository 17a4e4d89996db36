"""The account's own records through the client: the credit ledger (``GET /account/ledger``) and the
usage history (``GET /account/history``), one page at a time or every page back to a time.

Both routes answer newest first, ``{entries, next_cursor}``; ``next_cursor`` is null on the last page
(docs/api.md, Account and session routes). They are free and not rate-limited per account; a
per-address limit (10/s, burst 50) applies, and a 429 is retried by the client after ``Retry-After``.

    ledger_page, history_page       one page: ``limit`` 1 to 1,000, ``cursor`` or ``offset``
    read_ledger, read_history       every entry newer than ``since`` (or all), newest first
    pricing                         ``GET /pricing`` (public): each class's price and methods
    LedgerEntry, HistoryEntry       the entries' fields, as typed dicts (``pandas.DataFrame`` takes them)

Example:
    >>> async with GatewayClient(url, api_key=key) as gw:  # doctest: +SKIP
    ...     calls = await read_history(gw, since=datetime.now(UTC) - timedelta(hours=1))
    ...     print(len(calls), sum(c["credits"] for c in calls))
"""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING, Any, Literal, TypedDict
from urllib.parse import urlencode

if TYPE_CHECKING:
    from gateway_client.http import GatewayClient

#: The most one page holds.
MAX_PAGE = 1000


class LedgerEntry(TypedDict):
    """One credit movement: ``amount`` signed (a debit is negative), ``balance`` right after it."""

    type: Literal["deposit", "bonus", "debit", "refund", "expiry", "adjustment"]
    amount: int
    balance: int
    description: str
    timestamp: str  # ISO 8601 UTC, e.g. 2026-01-02T03:04:05.678Z
    signature: str | None  # the deposit's transaction for deposit and bonus entries


class HistoryEntry(TypedDict):
    """One call, or one WebSocket connection's notifications of one method in one settlement (``calls``
    of them): ``credits`` charged (0 when refunded)."""

    method: str
    credits: int
    timestamp: str
    request_id: str | None  # the answer's X-Request-Id; <id>:<n> for item n of a batch
    refunded: bool
    calls: int  # 1 for a call; a WebSocket connection's notifications in one settlement, counted


async def ledger_page(
    client: GatewayClient, *, limit: int | None = None, cursor: str | None = None, offset: int | None = None
) -> dict[str, Any]:
    """``GET /account/ledger``: ``{entries, next_cursor}``, newest first."""
    return await _page(client, "/account/ledger", limit, cursor, offset)


async def history_page(
    client: GatewayClient, *, limit: int | None = None, cursor: str | None = None, offset: int | None = None
) -> dict[str, Any]:
    """``GET /account/history``: ``{entries, next_cursor}``, newest first."""
    return await _page(client, "/account/history", limit, cursor, offset)


async def read_ledger(
    client: GatewayClient, *, since: datetime | None = None, max_entries: int = 100_000
) -> list[LedgerEntry]:
    """The ledger's entries at or after ``since`` (an aware datetime; None for all), newest first, at
    most ``max_entries``."""
    entries: list[Any] = await _read(client, "/account/ledger", since, max_entries)
    return entries


async def read_history(
    client: GatewayClient, *, since: datetime | None = None, max_entries: int = 100_000
) -> list[HistoryEntry]:
    """The calls at or after ``since`` (an aware datetime; None for all the history keeps: 90 days by
    default), newest first, at most ``max_entries``."""
    entries: list[Any] = await _read(client, "/account/history", since, max_entries)
    return entries


async def pricing(client: GatewayClient) -> dict[str, Any]:
    """``GET /pricing`` (public, free, sent without credentials): ``classes`` maps each method class to
    ``{credits, methods, not_available}``, so a history's methods can be grouped by class."""
    return await client._get_public("/pricing", {})


def parse_timestamp(value: str) -> datetime:
    """An entry's ``timestamp`` as an aware datetime."""
    return datetime.fromisoformat(value.replace("Z", "+00:00"))


async def _page(
    client: GatewayClient, path: str, limit: int | None, cursor: str | None, offset: int | None
) -> dict[str, Any]:
    query = {k: str(v) for k, v in (("limit", limit), ("cursor", cursor), ("offset", offset)) if v is not None}
    answer: dict[str, Any] = await client.request("GET", f"{path}?{urlencode(query)}" if query else path)
    return answer


async def _read(client: GatewayClient, path: str, since: datetime | None, max_entries: int) -> list[dict[str, Any]]:
    if since is not None and since.tzinfo is None:
        raise ValueError("since must be an aware datetime (the entries are in UTC)")
    out: list[dict[str, Any]] = []
    cursor: str | None = None
    while len(out) < max_entries:
        page = await _page(client, path, min(MAX_PAGE, max_entries - len(out)), cursor, None)
        for entry in page["entries"]:
            if since is not None and parse_timestamp(entry["timestamp"]) < since:
                return out  # newest first: everything further is older still
            out.append(entry)
        cursor = page["next_cursor"]
        if cursor is None:
            break
    return out


__all__ = [
    "MAX_PAGE",
    "HistoryEntry",
    "LedgerEntry",
    "history_page",
    "ledger_page",
    "parse_timestamp",
    "pricing",
    "read_history",
    "read_ledger",
]

"""The account page's reads beyond docs/api.md's interface (issue 51 item 6): usage totals per day, method
class and method from ``usage_daily`` (kept by the usage flush, :mod:`gateway.storage.ledger.daily`),
and the usage history and ledger as streamed CSV files, paged by key on the server.

Hand-written because the page must stay fast on a busy account: a chart summed from usage rows at read
time costs a scan of millions of rows, and an export built in the browser costs a request per page.
Documented in docs/api.md (Usage totals, CSV exports).
"""

from __future__ import annotations

import logging
import re
import time
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, timedelta
from typing import Any

from starlette.requests import Request
from starlette.responses import Response, StreamingResponse
from starlette.routing import BaseRoute, Route
from starlette.types import Receive, Scope, Send

from gateway.auth.account_views import history_entry, ledger_entry
from gateway.auth.errors import not_started
from gateway.auth.exports import Export, ending, open_export
from gateway.auth.paging import Page, query_uint
from gateway.auth.services import AuthServices
from gateway.auth.stage import Gates
from gateway.auth.store.accounts import AccountStore
from gateway.core.errors import account_not_found
from gateway.pipeline.http import BodyTooLarge, call_from_scope, mount, read_body, to_response, too_large_reply
from gateway.pipeline.stages import Call, Reply, compose, error_boundary, json_reply
from gateway.storage.errors import StoreUnavailable
from gateway.storage.seats import Seats

log = logging.getLogger(__name__)

DEFAULT_DAYS = 30
MAX_DAYS = 366
#: An export's bounds: past either, the file's last line says where to continue (docs/api.md, CSV exports).
EXPORT_MAX_ROWS = 1_000_000
EXPORT_MAX_SECONDS = 120.0
EXPORT_PAGE_ROWS = 2_000
OTHER_CLASS = "other"  # a method no class lists (a subscription's notifications)

COLUMNS: dict[str, tuple[tuple[str, bool], ...]] = {  # (name, is free text: formula-guarded)
    "history": (
        ("timestamp", False),
        ("method", True),
        ("calls", False),
        ("credits", False),
        ("refunded", False),
        ("request_id", True),
    ),
    "ledger": (
        ("timestamp", False),
        ("type", True),
        ("amount", False),
        ("balance", False),
        ("description", True),
        ("signature", True),
    ),
}
_FORMULA = re.compile(r"[=+\-@\t\r]")


def cell(value: Any, text: bool) -> str:
    """One CSV cell: a text cell a spreadsheet would run as a formula gets a leading ``'`` (as the page's
    own export did), and a cell with a comma, quote or line break is quoted."""
    v = "" if value is None else "true" if value is True else "false" if value is False else str(value)
    if text and _FORMULA.match(v):
        v = "'" + v
    if any(c in v for c in ',"\r\n'):
        v = '"' + v.replace('"', '""') + '"'
    return v


def csv_line(entry: dict[str, Any], columns: Sequence[tuple[str, bool]]) -> str:
    return ",".join(cell(entry[name], text) for name, text in columns) + "\r\n"


@dataclass(slots=True)
class StreamReply(Reply):
    """A 200 whose body is ``chunks``, sent as they come (:func:`stream_route`); ``on_close`` is called
    once the answer ended, however it ended (whole, cut by the client, never started)."""

    chunks: AsyncIterator[bytes] | None = field(default=None)
    on_close: Callable[[], None] | None = field(default=None)


def totals_document(
    rows: Sequence[Any], first: date, last: date, class_of: Callable[[str], str | None]
) -> dict[str, Any]:
    """``{ok, from, to, days: [{day, credits, calls, refunds, classes: {class: {credits, calls, refunds}}}],
    methods: [{method, class, credits, calls, refunds}]}``: every day from ``first`` to ``last`` (zeros on
    a day without calls), methods by credits then calls, most first."""
    days: dict[date, dict[str, Any]] = {}
    day = first
    while day <= last:
        days[day] = {"day": day.isoformat(), "credits": 0, "calls": 0, "refunds": 0, "classes": {}}
        day += timedelta(days=1)
    methods: dict[str, dict[str, Any]] = {}
    for r in rows:
        cls = str(class_of(r["method"]) or OTHER_CLASS)  # a StrEnum's value: orjson wants plain keys
        figures = {"credits": int(r["credits"]), "calls": int(r["calls"]), "refunds": int(r["refunds"])}
        target = days.get(r["day"])
        if target is not None:
            per_class = target["classes"].setdefault(cls, {"credits": 0, "calls": 0, "refunds": 0})
            for name, value in figures.items():
                target[name] += value
                per_class[name] += value
        m = methods.setdefault(
            r["method"], {"method": r["method"], "class": cls, "credits": 0, "calls": 0, "refunds": 0}
        )
        for name, value in figures.items():
            m[name] += value
    ranked = sorted(methods.values(), key=lambda m: (-m["credits"], -m["calls"], m["method"]))
    return {
        "ok": True,
        "from": first.isoformat(),
        "to": last.isoformat(),
        "days": list(days.values()),
        "methods": ranked,
    }


class UsageEndpoints:
    """``GET /account/usage/daily``, ``GET /account/usage.csv``, ``GET /account/ledger.csv``."""

    def __init__(
        self, services: AuthServices, seats: Seats, class_of: Callable[[str], str | None] = lambda method: None
    ) -> None:
        self.services = services
        self.seats = seats  # the exports running per account (gateway.auth.exports)
        self.class_of = class_of

    def _accounts(self) -> AccountStore:
        if self.services.accounts is None:
            raise not_started()
        return self.services.accounts

    async def _account(self, call: Call) -> str:
        pubkey = call.authenticated().pubkey
        if not await self._accounts().exists(pubkey):
            raise account_not_found()
        return pubkey

    async def daily(self, call: Call) -> Reply:
        """``GET /account/usage/daily?days=N`` (1 to 366, default 30): the last N UTC days, today included."""
        days = query_uint(dict(call.query), "days", DEFAULT_DAYS, 1, MAX_DAYS)
        pubkey = await self._account(call)
        last = datetime.now(UTC).date()
        first = last - timedelta(days=days - 1)
        rows = await self._accounts().usage_daily(pubkey, first)
        return json_reply(200, totals_document(rows, first, last, self.class_of))

    async def history_csv(self, call: Call) -> Reply:
        return await self._csv(call, "history")

    async def ledger_csv(self, call: Call) -> Reply:
        return await self._csv(call, "ledger")

    async def _csv(self, call: Call, which: str) -> Reply:
        """Newest first, from ``cursor`` (a page's ``next_cursor``: rows older than it) when given; at most
        ``limit`` rows (default and maximum EXPORT_MAX_ROWS)."""
        query = dict(call.query)
        limit = query_uint(query, "limit", EXPORT_MAX_ROWS, 1, EXPORT_MAX_ROWS)
        before = query_uint(query, "cursor", 0, 1, 2**63 - 1) if "cursor" in query else None
        pubkey = await self._account(call)
        headers = {
            "content-type": "text/csv; charset=utf-8",
            "content-disposition": f'attachment; filename="{which}-{pubkey[:8]}.csv"',
            "cache-control": "no-store",
        }
        services = self.services
        credential = services.credential_of(call.credentials, call.authenticated())
        export = await open_export(self.seats, services.revocations, pubkey, credential)
        rows = ending(self._rows(pubkey, which, before, limit, export), export)
        return StreamReply(200, b"", headers, rows, export.close)  # close: if the body never starts

    async def _rows(
        self, pubkey: str, which: str, before: int | None, limit: int, export: Export
    ) -> AsyncIterator[bytes]:
        columns = COLUMNS[which]
        yield (",".join(name for name, _ in columns) + "\r\n").encode()
        accounts = self._accounts()
        started = time.monotonic()
        sent = 0
        while sent < limit:
            if export.stopped is not None:  # the credential was revoked: no further page (docs/api.md)
                yield f"# stopped: {export.stopped}\r\n".encode()
                return
            page = Page(0, min(EXPORT_PAGE_ROWS, limit - sent), before)
            try:
                lines, last = await self._page(accounts, pubkey, which, page)
            except StoreUnavailable:  # the status is sent: the file says where it stopped (docs/api.md)
                log.warning("a %s export stopped after %d rows: the database did not answer", which, sent)
                resume = f"continue with ?cursor={before}" if before is not None else "export again"
                yield f"# stopped: the database did not answer; {resume}\r\n".encode()
                return
            if lines:
                yield "".join(lines).encode()
            sent += len(lines)
            if len(lines) < page.limit or last is None:
                return  # the oldest row is out
            before = last
            if time.monotonic() - started > EXPORT_MAX_SECONDS:
                break
        yield f"# more rows: continue with ?cursor={before}\r\n".encode()

    @staticmethod
    async def _page(accounts: AccountStore, pubkey: str, which: str, page: Page) -> tuple[list[str], int | None]:
        """A page's CSV lines and its last row's id."""
        columns = COLUMNS[which]
        if which == "history":
            calls = await accounts.history(pubkey, page)
            return [csv_line(history_entry(r), columns) for r in calls], calls[-1].id if calls else None
        entries = await accounts.ledger(pubkey, page)
        return [csv_line(ledger_entry(r), columns) for r in entries], entries[-1].id if entries else None


def stream_route(path: str, stages: Sequence[Any], endpoint: Callable[[Call], Any]) -> Route:
    """A GET route like :func:`gateway.pipeline.http.mount` whose 200 is streamed: the stages (limits,
    credentials) and every error answer as there, then the body as the endpoint's chunks come."""
    handler = compose([error_boundary, *stages], endpoint)

    async def route(request: Request) -> Response:
        try:
            body = await read_body(request, 0)
        except BodyTooLarge:
            return to_response(too_large_reply(0))
        reply = await handler(call_from_scope(request.scope, body))
        if isinstance(reply, StreamReply) and reply.chunks is not None:
            media = reply.headers.pop("content-type")
            return _Streaming(reply.chunks, reply.status, reply.headers, media_type=media, on_close=reply.on_close)
        return to_response(reply)

    return Route(path, route, methods=["GET"])


class _Streaming(StreamingResponse):
    """Starlette's streamed answer, calling ``on_close`` once it is over: a body the client cut before
    its first chunk is never iterated, so the body's own ``finally`` cannot be relied on."""

    def __init__(
        self,
        content: AsyncIterator[bytes],
        status_code: int,
        headers: dict[str, str],
        media_type: str,
        on_close: Callable[[], None] | None,
    ) -> None:
        super().__init__(content, status_code, headers, media_type=media_type)
        self.on_close = on_close

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            await super().__call__(scope, receive, send)
        finally:
            if self.on_close is not None:
                self.on_close()


def usage_routes(gates: Gates, endpoints: UsageEndpoints) -> list[BaseRoute]:
    """The three routes, behind the account reads' per-address limit and any credential."""
    reads, any_mode = gates.limit("account_read"), gates.account_stage()
    return [
        mount("/account/usage/daily", "GET", [reads, any_mode], endpoints.daily),
        stream_route("/account/usage.csv", [reads, any_mode], endpoints.history_csv),
        stream_route("/account/ledger.csv", [reads, any_mode], endpoints.ledger_csv),
    ]

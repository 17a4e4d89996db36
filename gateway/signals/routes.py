"""``GET /signals/recent``: a free snapshot of the signal log (docs/api.md, Signals).

Public like ``/health``: no credentials, no credit headers. What bounds the work of one request is the
answer itself: at most :data:`gateway.signals.rules.MAX_RECENT_LIMIT` events, read with one
``XREVRANGE`` of that count (a kind has a stream of its own, so a kind filter scans nothing else); what
bounds a caller's requests is the per-address limit ``signals`` (``ip_limits``, 429 with Retry-After).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from starlette.routing import BaseRoute

from gateway.auth.stage import Gates
from gateway.core.errors import ProxyError, invalid_request, service_unavailable
from gateway.pipeline.http import mount
from gateway.pipeline.stages import Call, Reply, json_reply
from gateway.signals.rules import RecentQuery
from gateway.signals.store import RecentSignals, SignalLog
from gateway.storage.errors import StoreUnavailable

RECENT_PATH = "/signals/recent"


def signal_routes(gates: Gates, signal_log: Callable[[], SignalLog | None]) -> list[BaseRoute]:
    """``/signals/recent``; ``signal_log`` is read per call (the log exists once the replica has Redis)."""

    async def recent(call: Call) -> Reply:
        try:
            query = RecentQuery.parse(call.query)
        except ValueError as exc:
            return _refused(invalid_request(str(exc)))
        log = signal_log()
        if log is None:
            return _refused(service_unavailable("signals are not available: the gateway has no Redis yet", 5))
        try:
            found = await log.recent(query.limit, query.kind, query.since_slot, query.before)
        except StoreUnavailable:
            return _refused(service_unavailable("the signal log is unavailable; retry shortly", 5))
        return json_reply(200, recent_document(found, log.retention))

    return [mount(RECENT_PATH, "GET", [gates.limit("signals")], recent)]


def recent_document(found: RecentSignals, retention: int) -> dict[str, Any]:
    """The answer: events newest first (each with its ``id``), whether older ones were left out, and
    the slot to pass as ``since_slot`` next time to get only what came after this answer."""
    newest = found.events[0].event.get("slot") if found.events else None
    marks = [s for s in (found.cursor, newest) if isinstance(s, int)]
    return {
        "events": [{"id": stored.id, **stored.event} for stored in found.events],
        "more": found.more,
        "next_since_slot": max(marks) if marks else None,
        "retention_events": retention,
    }


def _refused(error: ProxyError) -> Reply:
    return json_reply(error.status, error.http_body(None), dict(error.headers))

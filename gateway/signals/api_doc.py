"""``GET /signals/recent`` in the OpenAPI document (built with :mod:`gateway.core.api_doc`; docs/api.md,
Signals): free, no credentials."""

from __future__ import annotations

from typing import Any

from gateway.core.api_doc import ApiDoc, json_answer, ref
from gateway.core.patterns import SIGNAL_ID
from gateway.signals.models import RecentSignals
from gateway.signals.routes import RECENT_PATH
from gateway.signals.rules import DEFAULT_RECENT_LIMIT, KINDS, MAX_RECENT_LIMIT


def _recent_signals_operation() -> dict[str, Any]:
    params = [
        {
            "name": "limit",
            "in": "query",
            "schema": {"type": "integer", "minimum": 1, "maximum": MAX_RECENT_LIMIT, "default": DEFAULT_RECENT_LIMIT},
        },
        {"name": "kind", "in": "query", "schema": {"type": "string", "enum": list(KINDS)}},
        {
            "name": "since_slot",
            "in": "query",
            "schema": {"type": "integer", "minimum": 0, "maximum": 2**64 - 2},
            "description": "only events of a later slot",
        },
        {
            "name": "before",
            "in": "query",
            "schema": {"type": "string", "pattern": SIGNAL_ID},
            "description": "only events before this id (the next page of an answer with more: true)",
        },
    ]
    return {
        "summary": "Recent signal events, newest first: free, no credentials (docs/api.md, Signals)",
        "tags": ["Public"],
        "security": [],
        "parameters": params,
        "responses": {
            "200": json_answer(ref("RecentSignals"), "the events"),
            "400": json_answer(ref("ErrorBody"), "a bad parameter: INVALID_REQUEST"),
            "429": json_answer(
                ref("ErrorBody"), "the per-address limit (ip_limits signals): RATE_LIMITED, with Retry-After"
            ),
            "503": json_answer(
                ref("ErrorBody"), "the signal log (Redis) is unavailable: SERVICE_TEMPORARILY_UNAVAILABLE"
            ),
        },
    }


def paths() -> dict[str, Any]:
    return {RECENT_PATH: {"get": _recent_signals_operation()}}


API_DOC = ApiDoc(paths, (RecentSignals,))

"""``/bulk/*`` in the OpenAPI document (built with :mod:`gateway.core.api_doc`; docs/api.md, Bulk lookups)."""

from __future__ import annotations

from typing import Any

from gateway.bulk.models import (
    BalancesAnswer,
    BalancesRequest,
    TokenBalancesAnswer,
    TokenBalancesRequest,
    TransactionsAnswer,
    TransactionsRequest,
)
from gateway.bulk.rules import BULK_CREDITS, MAX_BULK_ITEMS
from gateway.core.api_doc import ApiDoc, errors, json_answer, operation, ref

#: name -> (the items' field, what each answers, the request model, the answer model)
_BULK = {
    "getBalances": ("addresses", "lamports of each address", "BalancesRequest", "BalancesAnswer"),
    "getTokenBalances": (
        "owners",
        "SPL Token and Token-2022 accounts of each owner, exact amounts",
        "TokenBalancesRequest",
        "TokenBalancesAnswer",
    ),
    "getTransactions": (
        "signatures",
        "each transaction (null when absent)",
        "TransactionsRequest",
        "TransactionsAnswer",
    ),
}


def _bulk_operation(name: str) -> dict[str, Any]:
    field, what, request, answer = _BULK[name]
    credits = BULK_CREDITS[name]
    return operation(
        f"Bulk: {what}; up to {MAX_BULK_ITEMS} {field}, {credits} credit{'s' if credits > 1 else ''} per distinct "
        "valid one, reserved all at once; failed lookups refunded (docs/api.md, Bulk lookups)",
        json_answer(ref(answer), "results and per-item errors, matched by key"),
        {
            **errors(400, 401, 403, 405, 413, 500, 503),
            **errors(402, rpc=(402,)),
            "429": json_answer(
                ref("ErrorBody"),
                "the account's rate or concurrency limit: RATE_LIMITED or "
                "CONCURRENCY_LIMITED, with Retry-After; nothing charged",
            ),
            "502": json_answer(
                ref("ErrorBody"), "the node answered none of the lookups: UPSTREAM_ERROR, nothing charged"
            ),
        },
        body=request,
        secured=True,
        tag="Bulk",
    )


def paths() -> dict[str, Any]:
    return {f"/bulk/{name}": {"post": _bulk_operation(name)} for name in _BULK}


API_DOC = ApiDoc(
    paths,
    (
        BalancesRequest,
        TokenBalancesRequest,
        TransactionsRequest,
        BalancesAnswer,
        TokenBalancesAnswer,
        TransactionsAnswer,
    ),
)

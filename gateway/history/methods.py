"""``getTransactionHistory``: its declaration and parameter parser. Pure.

What the parser refuses is refused free, before admission; what it returns (a :class:`HistoryQuery`)
is what the handler (:mod:`gateway.history.method`) reads.
"""

from __future__ import annotations

from typing import Any

from gateway.core.errors import RpcError, invalid_params
from gateway.core.methods import MethodClass, MethodSpec
from gateway.core.params import is_pubkey
from gateway.history.enrich import DEFAULT_HISTORY_LIMIT, MAX_HISTORY_LIMIT, HistoryQuery


def parse_history(params: list[Any]) -> HistoryQuery | RpcError:
    """``[<address>, {limit?: 1..100 (default 10)}]``; anything else is refused free."""
    usage = f"params are [<address, base58>, {{limit?: 1 to {MAX_HISTORY_LIMIT}}}]"
    if not 1 <= len(params) <= 2 or not is_pubkey(params[0]):
        return invalid_params(usage)
    options = params[1] if len(params) > 1 and params[1] is not None else {}
    if not isinstance(options, dict):
        return invalid_params(usage)
    unknown = set(options) - {"limit"}
    if unknown:
        return invalid_params(f"unknown field {sorted(unknown)[0]!r}: {usage}")
    limit = DEFAULT_HISTORY_LIMIT if options.get("limit") is None else options["limit"]
    if not isinstance(limit, int) or isinstance(limit, bool) or not 1 <= limit <= MAX_HISTORY_LIMIT:
        return invalid_params(f"limit must be an integer from 1 to {MAX_HISTORY_LIMIT}")
    return HistoryQuery(params[0], limit)


SPECS: tuple[MethodSpec[Any], ...] = (
    MethodSpec("getTransactionHistory", MethodClass.READ_HEAVY, parse_history, local=True),
)

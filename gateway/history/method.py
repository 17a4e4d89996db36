"""``getTransactionHistory``: an address's recent transactions, each enriched and explained.

Planning already read the params into a :class:`~gateway.history.enrich.HistoryQuery` (refused free
otherwise: an address that is not base58, a limit outside 1..100). Two round trips to the node,
whatever the limit: ``getSignaturesForAddress`` (``confirmed``, newest first), then every
``getTransaction`` of the list in ONE JSON-RPC batch; the enrichment and the words are pure code
(:mod:`gateway.history.enrich`). Both share the class's timeout (READ_HEAVY, 30 s) as one deadline.

What the node no longer has (outside its retention, an address it never saw) is an empty list or a
``found: false`` entry, not an error. When the node cannot be reached, times out, answers an error to
the list or to every transaction, or something that is not what was asked, the caller gets a JSON-RPC
error and is refunded: a history with holes the caller cannot see is worse than none. When it answers
an error to some of the transactions only, those are ``found: false`` entries saying so, and their
share of the price is refunded (:func:`failed_share`): the others' lookups were made and are charged.
"""

from __future__ import annotations

import asyncio
from typing import Any

from gateway.core.errors import RpcCode, RpcError
from gateway.core.jsonrpc import RpcItem
from gateway.core.methods import CLASS_TIMEOUT_S, MethodClass
from gateway.history.enrich import HistoryQuery, history, signature_list, transaction_request
from gateway.node.http import ChainError, Upstream, UpstreamTimeout, UpstreamUnavailable, rpc_batch, rpc_call
from gateway.pipeline.stages import Call
from gateway.rpc.answers import answer, refuse, transport_failure

NO_HISTORY = "the node could not give the history"


class TransactionHistory:
    """The ``getTransactionHistory`` handler: two node calls, then pure enrichment."""

    def __init__(self, node: Upstream) -> None:
        self.node = node

    async def __call__(self, item: RpcItem, call: Call) -> None:
        query = item.parsed(HistoryQuery)
        timeout = CLASS_TIMEOUT_S[item.method_class or MethodClass.READ_HEAVY]
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        item.sent = True
        try:
            listed_answer = await rpc_call(
                self.node,
                "getSignaturesForAddress",
                [query.address, {"limit": query.limit, "commitment": "confirmed"}],
                timeout,
            )
            listed = signature_list(listed_answer)
            if listed is None:
                self._malformed(item, "a signature list")
                return
            left = deadline - loop.time()
            if listed and left <= 0:
                raise UpstreamTimeout(f"no answer within {timeout:g} s")
            calls = [("getTransaction", transaction_request(e["signature"])) for e in listed]
            transactions = await rpc_batch(self.node, calls, left) if calls else []
        except ChainError as exc:
            self._node_error(item, exc.message)
            return
        except (UpstreamUnavailable, UpstreamTimeout) as exc:
            transport_failure(item, exc)  # billing refunds a read that got no answer
            return
        failed = [tx for tx in transactions if isinstance(tx, ChainError)]
        if failed and len(failed) == len(transactions):
            self._node_error(item, failed[0].message)
            return
        if not all(tx is None or isinstance(tx, dict | ChainError) for tx in transactions):
            self._malformed(item, "transactions")
            return
        errors = [str(tx.message)[:200] if isinstance(tx, ChainError) else None for tx in transactions]
        found = [None if isinstance(tx, ChainError) else tx for tx in transactions]
        answer(item, history(listed, found, errors))
        item.refund_part = failed_share(item.price, len(failed), len(transactions))

    @staticmethod
    def _node_error(item: RpcItem, message: Any) -> None:
        refuse(item, RpcError(RpcCode.BACKEND_UNAVAILABLE, f"{item.method}: {NO_HISTORY}: {message}"), NO_HISTORY)

    @staticmethod
    def _malformed(item: RpcItem, what: str) -> None:
        error = RpcError(RpcCode.BACKEND_UNAVAILABLE, f"{item.method}: {NO_HISTORY}: it did not answer {what}")
        refuse(item, error, NO_HISTORY)


def failed_share(price: int, failed: int, looked_up: int) -> int:
    """The credits of a history given back for its ``failed`` lookups of ``looked_up``: their share of
    the price, rounded down (exact integers; the list itself was answered and stays charged)."""
    return price * failed // looked_up if looked_up else 0

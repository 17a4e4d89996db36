"""``getTransactionHistory``: an address's recent transactions, each enriched and explained.

Planning already read the params into a :class:`~gateway.history.enrich.HistoryQuery` (refused free
otherwise: an address that is not base58, a limit outside 1..100). Two round trips to the node,
whatever the limit: ``getSignaturesForAddress`` (``confirmed``, newest first), then every
``getTransaction`` of the list in ONE JSON-RPC batch; the enrichment and the words are pure code
(:mod:`gateway.history.enrich`). Both share the class's timeout (READ_HEAVY, 30 s) as one deadline.

What the node no longer has (outside its retention, an address it never saw) is an empty list or a
``found: false`` entry, not an error. When the node cannot be reached, times out, answers an error
(to the list or to any of the transactions) or something that is not what was asked, the caller
gets a JSON-RPC error and is refunded: a history with holes the caller cannot see is worse than none.
"""

from __future__ import annotations

import asyncio
from typing import Any

from gateway.answers import answer, refuse, transport_failure
from gateway.core.errors import RpcCode, RpcError
from gateway.core.jsonrpc import RpcItem
from gateway.core.methods import CLASS_TIMEOUT_S, MethodClass
from gateway.history.enrich import HistoryQuery, history, signature_list, transaction_request
from gateway.node.http import ChainError, Upstream, UpstreamTimeout, UpstreamUnavailable, rpc_batch, rpc_call
from gateway.pipeline import Call

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
        failed = next((tx for tx in transactions if isinstance(tx, ChainError)), None)
        if failed is not None:
            self._node_error(item, failed.message)
            return
        if not all(tx is None or isinstance(tx, dict) for tx in transactions):
            self._malformed(item, "transactions")
            return
        answer(item, history(listed, transactions))

    @staticmethod
    def _node_error(item: RpcItem, message: Any) -> None:
        refuse(item, RpcError(RpcCode.BACKEND_UNAVAILABLE, f"{item.method}: {NO_HISTORY}: {message}"), NO_HISTORY)

    @staticmethod
    def _malformed(item: RpcItem, what: str) -> None:
        error = RpcError(RpcCode.BACKEND_UNAVAILABLE, f"{item.method}: {NO_HISTORY}: it did not answer {what}")
        refuse(item, error, NO_HISTORY)

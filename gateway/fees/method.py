"""``suggestPriorityFee`` and ``getPriorityFeeEstimate``: priority-fee estimates from the node's recent fees.

Planning already read the params into a :class:`~gateway.core.fees.FeeQuery` (refused free
otherwise). Each call is one ``getRecentPrioritizationFees`` to the node: without accounts the
global window, with them the window scoped to those accounts; the percentiles and the result are
pure code (:mod:`gateway.core.fees`). An estimate is never made up: when the node cannot be reached,
times out, answers an error or something that is not a fee window, the caller gets an error and is
refunded, never a zero that reads as "no fee needed".
"""

from __future__ import annotations

from typing import Any

from gateway.core.errors import RpcCode, RpcError
from gateway.core.fees import FeeQuery, FeeSample, estimate, fee_sample, slot_fees, suggestion
from gateway.core.jsonrpc import RpcItem
from gateway.core.methods import CLASS_TIMEOUT_S
from gateway.node.http import ChainError, Upstream, UpstreamTimeout, UpstreamUnavailable, rpc_call
from gateway.pipeline.stages import Call
from gateway.rpc.answers import answer, refuse, transport_failure

DEFAULT_TIMEOUT_S = 5.0
NO_ESTIMATE = "no recent fees from the node"


class _FeeMethod:
    """One fee sample from the node per call; subclasses shape the result."""

    def __init__(self, node: Upstream) -> None:
        self.node = node

    async def _sample(self, item: RpcItem, query: FeeQuery) -> FeeSample | None:
        """The fee sample of the query, or None with the item answered by an error (refunded)."""
        params: list[Any] = [list(query.accounts)] if query.accounts else []
        item.sent = True
        try:
            window = await rpc_call(self.node, "getRecentPrioritizationFees", params, self._timeout(item))
        except ChainError as exc:
            refuse(
                item, RpcError(RpcCode.BACKEND_UNAVAILABLE, f"{item.method}: {NO_ESTIMATE}: {exc.message}"), NO_ESTIMATE
            )
            return None
        except (UpstreamUnavailable, UpstreamTimeout) as exc:
            transport_failure(item, exc)  # billing refunds a read that got no answer
            return None
        fees = slot_fees(window)
        if fees is None:
            refuse(
                item, RpcError(RpcCode.BACKEND_UNAVAILABLE, f"{item.method}: {NO_ESTIMATE} it could read"), NO_ESTIMATE
            )
            return None
        return fee_sample(fees, scoped=bool(query.accounts))

    @staticmethod
    def _timeout(item: RpcItem) -> float:
        """The class's timeout (docs/api.md, Limits): 5 s READ_CHEAP, 15 s READ_MEDIUM."""
        return CLASS_TIMEOUT_S.get(item.method_class, DEFAULT_TIMEOUT_S) if item.method_class else DEFAULT_TIMEOUT_S


class SuggestPriorityFee(_FeeMethod):
    async def __call__(self, item: RpcItem, call: Call) -> None:
        query = item.parsed(FeeQuery)
        sample = await self._sample(item, query)
        if sample is not None:
            answer(item, suggestion(sample, query.level))


class PriorityFeeEstimate(_FeeMethod):
    async def __call__(self, item: RpcItem, call: Call) -> None:
        query = item.parsed(FeeQuery)
        sample = await self._sample(item, query)
        if sample is not None:
            answer(item, estimate(sample, query.level, query.include_all))

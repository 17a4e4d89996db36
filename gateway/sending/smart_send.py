"""``sendSmartTransaction``: a signed transaction, checked, optionally simulated, sent; its signature at once.

Planning already decoded it and verified every signature (refused free otherwise). Then:

- ``priority_fee_urgency``: a signed transaction's compute-unit price cannot be changed without
  invalidating its signature, so the urgency is a guard, not an adjustment: when the price it pays
  is below the recent fees' percentile for that urgency (25th/50th/75th/90th), it is refused free
  with an error naming both prices, and not sent. Rebuild it with a higher ``SetComputeUnitPrice``.
  The fee window is read at most once a second per replica (:data:`FEE_WINDOW_TTL_S`): free
  refusals cannot make the node work per request.
- ``simulate: true``: a signature-verifying simulation first; a failure is refunded and not sent, and
  answers the transaction error alone (:mod:`gateway.sending.preflight`).
- Sent to the node with ``skipPreflight`` (the caller chose whether to simulate), and answered with
  the signature; the caller polls ``getSignatureStatuses``.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from gateway.core.errors import RpcCode, RpcError, invalid_params
from gateway.core.fees import URGENCY_PERCENTILES, percentile, recent_fees
from gateway.core.jsonrpc import RpcItem
from gateway.core.transactions import WireTx, compute_unit_price
from gateway.node.http import ChainError, Upstream, UpstreamTimeout, UpstreamUnavailable, rpc_call
from gateway.pipeline.stages import Call
from gateway.rpc.answers import answer, config, node_error, refuse, transport_failure
from gateway.sending.preflight import simulate, simulation_failed

SEND_TIMEOUT_S = 10.0
READ_TIMEOUT_S = 5.0
#: How long one reading of the node's fee window serves the urgency guard. A refusal is free, so the
#: node's work behind it is bounded per replica (one read a second), not per caller.
FEE_WINDOW_TTL_S = 1.0


class SmartSend:
    def __init__(self, node: Upstream, clock: Callable[[], float] = time.monotonic) -> None:
        self.node = node
        self.clock = clock
        self._window: tuple[float, list[int]] | None = None  # (read at, the slots' fees)

    async def __call__(self, item: RpcItem, call: Call) -> None:
        tx = item.parsed(WireTx)
        options = config(item)
        try:
            urgency = options.get("priority_fee_urgency")
            if urgency is not None and await self._below_urgency(item, tx, urgency):
                return
            if options.get("simulate", False) and not await self._simulates(item, tx):
                return
        except ChainError as exc:
            refuse(
                item,
                RpcError(RpcCode.BACKEND_UNAVAILABLE, f"the node could not check the transaction: {exc.message}"),
                "not sent",
            )
            return
        except (UpstreamUnavailable, UpstreamTimeout) as exc:
            refuse(
                item,
                RpcError(RpcCode.BACKEND_UNAVAILABLE, f"the node could not check the transaction ({exc})"),
                "not sent",
            )
            return
        await send(self.node, item, tx)

    async def _below_urgency(self, item: RpcItem, tx: WireTx, urgency: str) -> bool:
        wanted = percentile(await self._recent_fees(), URGENCY_PERCENTILES[urgency])
        paid = compute_unit_price(tx.tx)
        if paid >= wanted:
            return False
        refuse(
            item,
            invalid_params(
                f"the transaction pays {paid} micro-lamports per compute unit, below the {wanted} of "
                f"priority_fee_urgency '{urgency}' (percentile {URGENCY_PERCENTILES[urgency]} of recent fees). "
                "A signed transaction cannot be changed: rebuild it with a higher SetComputeUnitPrice, or send it "
                "without priority_fee_urgency"
            ),
            "refused before sending",
        )
        return True

    async def _recent_fees(self) -> list[int]:
        if self._window is not None and self.clock() - self._window[0] < FEE_WINDOW_TTL_S:
            return self._window[1]
        fees = recent_fees(await rpc_call(self.node, "getRecentPrioritizationFees", [], READ_TIMEOUT_S))
        self._window = (self.clock(), fees)
        return fees

    async def _simulates(self, item: RpcItem, tx: WireTx) -> bool:
        value = await simulate(self.node, tx, READ_TIMEOUT_S)
        if value is None:
            error = RpcError(-32002, "Transaction simulation failed: the node answered no simulation")
        elif value.get("err") is None:
            return True
        else:
            error = simulation_failed(value["err"])
        refuse(item, error, "simulation failed: not sent")
        return False


async def send(node: Upstream, item: RpcItem, tx: WireTx) -> None:
    """``sendTransaction`` to the node as is (skipPreflight); the signature, or what went wrong."""
    item.sent = True
    options = {"encoding": "base64", "skipPreflight": True}
    try:
        signature = await rpc_call(node, "sendTransaction", [tx.base64, options], SEND_TIMEOUT_S)
    except ChainError as exc:
        node_error(item, exc)
        return
    except (UpstreamUnavailable, UpstreamTimeout) as exc:
        transport_failure(item, exc)
        return
    answer(item, signature)

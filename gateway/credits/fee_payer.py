"""The x402 fee payer's SOL, read from the node and set as a gauge (docs/operations.md): sponsored
settlements pay their fee from it, and stop when it runs dry. Run by the ``deposit-watcher`` actor,
one per cluster, every ``FEE_PAYER_INTERVAL_S``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging

from gateway.credits import metrics
from gateway.node.http import ChainError, Upstream, UpstreamTimeout, UpstreamUnavailable, rpc_call

log = logging.getLogger(__name__)

FEE_PAYER_INTERVAL_S = 30.0


async def fee_payer_lamports(upstream: Upstream, address: str) -> int | None:
    """The address's balance in lamports (confirmed), or None when the node does not say."""
    try:
        answer = await rpc_call(upstream, "getBalance", [address, {"commitment": "confirmed"}])
    except (ChainError, UpstreamTimeout, UpstreamUnavailable) as exc:
        log.debug("fee payer balance: %s", exc)
        return None
    value = answer.get("value") if isinstance(answer, dict) else None
    return value if isinstance(value, int) else None


async def fee_payer_gauge(
    upstream: Upstream, address: str, stop: asyncio.Event, interval_s: float = FEE_PAYER_INTERVAL_S
) -> None:
    while not stop.is_set():
        lamports = await fee_payer_lamports(upstream, address)
        if lamports is not None:
            metrics.FEE_PAYER_LAMPORTS.set(lamports)
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), interval_s)

"""``GET /x402/blockhash``: the recent blockhash a sponsored payment is built on, for a client with no RPC.

An x402 client reads the blockhash from its own RPC (examples/x402_pay.py reads the devnode's). The account
page has none: its Content-Security-Policy lets it talk to this origin only, and a wallet with no credits
cannot call ``getLatestBlockhash`` here. So this route serves that one value, and bounds its work whoever
asks: one node read per :data:`MAX_AGE_S` per replica (callers finding it stale share the read), answered
from memory otherwise; the per-address limit of ``x402_settle`` bounds each caller (docs/api.md, x402).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

from gateway.core.errors import ProxyError
from gateway.core.params import node_integer
from gateway.node.http import ChainError, Upstream, UpstreamTimeout, UpstreamUnavailable, rpc_call
from gateway.node.single_flight import Fresh
from gateway.pipeline.stages import Call, Reply, json_reply

BLOCKHASH_PATH = "/x402/blockhash"
#: A blockhash stays usable for about 150 blocks (a minute); one this old leaves the payer nearly all of it.
MAX_AGE_S = 2.0
READ_TIMEOUT_S = 5.0


@dataclass(frozen=True, slots=True)
class Recent:
    blockhash: str
    last_valid_block_height: int


class RecentBlockhash:
    """The node's ``confirmed`` blockhash, read again only when the last read is older than ``max_age_s``."""

    def __init__(
        self, upstream: Upstream, max_age_s: float = MAX_AGE_S, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.upstream = upstream
        self._fresh = Fresh(self._read, max_age_s, clock)

    async def recent(self) -> Recent:
        return await self._fresh()

    async def _read(self) -> Recent:
        try:
            answer = await rpc_call(self.upstream, "getLatestBlockhash", [{"commitment": "confirmed"}], READ_TIMEOUT_S)
            value = answer["value"]
            height = node_integer(value["lastValidBlockHeight"])
            if height is None or not isinstance(value["blockhash"], str):
                raise ValueError("not a blockhash and its last valid block height")
            fresh = Recent(value["blockhash"], height)
        except (ChainError, UpstreamUnavailable, UpstreamTimeout, KeyError, TypeError, ValueError) as exc:
            raise ProxyError(
                502, "UPSTREAM_ERROR", f"the node gave no blockhash ({exc}); retry", data={"reason": "node_unreachable"}
            ) from exc
        return fresh

    async def __call__(self, call: Call) -> Reply:
        recent = await self.recent()
        document = {"blockhash": recent.blockhash, "last_valid_block_height": recent.last_valid_block_height}
        return json_reply(200, document, {"Cache-Control": "no-store"})

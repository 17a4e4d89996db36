"""A client of a block engine's JSON-RPC API (Jito's shape): bundles, their statuses, tip accounts,
the tip floor. The gateway's relay routes and its bundle-relay send leg use it.

Transport failures are :class:`gateway.node.http.UpstreamUnavailable` / ``UpstreamTimeout`` (with
``sent`` telling whether the request can have reached the engine), JSON-RPC errors are
:class:`gateway.node.http.ChainError`, as for the node.
"""

from __future__ import annotations

from typing import Any

import orjson

from gateway.node.http import ChainError, HttpUpstream, rpc_call
from gateway.sending.settings import SendingSettings

TIMEOUT_S = 10.0


class BlockEngine:
    @classmethod
    def from_settings(cls, settings: SendingSettings) -> BlockEngine | None:
        """The configured block engine, or None: no bundle methods, no relay leg."""
        return cls(settings.block_engine_url, settings.tip_floor_url) if settings.block_engine_url else None

    def __init__(self, base_url: str, tip_floor_url: str | None = None) -> None:
        """``base_url`` ends in ``/api/v1``: ``{base}/bundles``, ``{base}/transactions``; the tip floor is
        ``{base}/bundles/tip_floor`` unless ``tip_floor_url`` (mainnet serves it from another host)."""
        self.base_url = base_url.rstrip("/")
        self._bundles = HttpUpstream(f"{self.base_url}/bundles", connections=64)
        self._transactions = HttpUpstream(f"{self.base_url}/transactions", connections=64)
        self._tip_floor = HttpUpstream(tip_floor_url or f"{self.base_url}/bundles/tip_floor", connections=4)

    async def close(self) -> None:
        for client in (self._bundles, self._transactions, self._tip_floor):
            await client.close()

    async def call(self, method: str, params: list[Any]) -> Any:
        """A bundles-API method (sendBundle, getBundleStatuses, getInflightBundleStatuses, getTipAccounts)."""
        return await rpc_call(self._bundles, method, params, TIMEOUT_S)

    async def send_transaction(self, encoded: str) -> Any:
        return await rpc_call(self._transactions, "sendTransaction", [encoded, {"encoding": "base64"}], TIMEOUT_S)

    async def tip_floor(self) -> Any:
        """The landed-tip percentiles (in SOL, as the engine gives them)."""
        raw = await self._tip_floor.get(TIMEOUT_S)
        try:
            return orjson.loads(raw)
        except orjson.JSONDecodeError as exc:
            raise ChainError(None, "tip_floor: the block engine answered something that is not JSON") from exc

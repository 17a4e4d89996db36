"""The public documents: ``/health``, ``/pricing``, ``/capabilities``. Pure functions of state."""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from gateway.bulk.rules import BULK_CREDITS, MAX_BULK_ITEMS
from gateway.core.methods import MethodClass, PriceTable, Registry
from gateway.core.subscriptions import UNAVAILABLE, Limits, pricing_view
from gateway.grpc.rules import StreamLimits
from gateway.grpc.rules import pricing_view as grpc_pricing_view
from gateway.node.http import HttpUpstream
from gateway.signals.rules import KINDS
from gateway.webhooks.rules import pricing_view as webhook_pricing_view


@dataclass
class ServiceProfile:
    """What this deployment offers. Flags turn on as the parts behind them are built and configured."""

    auth: dict[str, bool] = field(
        default_factory=lambda: {"wallet_signature": True, "api_key": True, "session_token": True}
    )
    services: dict[str, bool] = field(
        default_factory=lambda: {
            "hot_rpc": True,
            "send": True,
            "websocket": True,
            "websocket_block_subscribe": "blockSubscribe" not in UNAVAILABLE,
            "websocket_vote_subscribe": "voteSubscribe" not in UNAVAILABLE,
            "yellowstone_grpc": False,
            "heavy_indexed_rpc": True,
        }
    )
    archive_history: bool = False
    #: The signal kinds the classifier emits (subscribeSignal, /signals/recent): all of them in this build.
    signals: dict[str, bool] = field(default_factory=lambda: dict.fromkeys(KINDS, True))

    def health_view(self) -> dict[str, Any]:
        return {"auth": dict(self.auth), "services": dict(self.services)}

    def capabilities_view(self) -> dict[str, Any]:
        return {
            "auth": dict(self.auth),
            "services": {**self.services, "archive_history": self.archive_history},
            "signals": dict(self.signals),
        }


def health_document(
    upstream: HttpUpstream, profile: ServiceProfile, started_at: float, keys: Mapping[str, Any] | None = None
) -> tuple[int, dict[str, Any]]:
    """The Health document and its HTTP status: 503 ``starting`` until a node has answered. ``keys``: the
    service keys this node serves (``AuthServices.keys_view``)."""
    primary, fallback = upstream.primary, upstream.fallback
    now = time.time()
    doc: dict[str, Any] = {"agave_healthy": primary.healthy, "service_profile": profile.health_view()}
    if keys is not None:
        doc["keys"] = dict(keys)
    if primary.healthy:
        status, node = "ok", primary
    elif upstream.use_fallback:
        status, node = "degraded", fallback
    elif primary.ever_healthy:
        status, node = "degraded", None
    else:
        status, node = "starting", None
    doc["status"] = status
    doc["paid_traffic_ready"] = node is not None
    if status == "degraded":
        doc["fallback_active"] = upstream.use_fallback
    if node is not None:
        doc.update(
            solanaSlot=node.slot,
            solanaBlockHeight=node.block_height,
            uptime=int(now - started_at),
            nodeVersion=node.version,
        )
    doc["timestamp"] = int(now)
    return (503 if status == "starting" else 200), doc


def pricing_document(
    prices: PriceTable,
    credits_per_usdc: int,
    credit_expiry_seconds: int,
    methods: Registry[Any],
    trade_builders: Mapping[str, Any] | None = None,
    ws_limits: Limits | None = None,
    grpc_limits: StreamLimits | None = None,
) -> dict[str, Any]:
    """``methods``: every method, by class (those not available yet marked); ``trade_builders``: the
    builders' fee, percentage and rate (``GatewayApp.trade_pricing``);
    ``ws_limits``, ``grpc_limits``: the WebSocket's and the gRPC stream's limits as configured."""
    document: dict[str, Any] = {
        "ok": True,
        "credits_per_usdc": credits_per_usdc,
        "credit_expiry_seconds": credit_expiry_seconds,
        "minimum_deposit_usdc": "0.01",
        "classes": prices.document(methods),
        "send_and_confirm": {
            "landing_credits": prices.price(MethodClass.SEND_AND_CONFIRM),
            "base_fee_credits": prices.price(MethodClass.SEND),
            "held_at_admission": prices.price(MethodClass.SEND_AND_CONFIRM),
            "charged": "landing_credits when confirmed; base_fee_credits when it landed and failed; nothing when "
            "it never landed before its blockhash expired or its preflight refused it",
        },
        "bulk": {
            f"/bulk/{name}": {"credits_per_item": credits, "max_items": MAX_BULK_ITEMS}
            for name, credits in BULK_CREDITS.items()
        },
        "websocket": pricing_view(ws_limits or Limits()),
        "grpc": grpc_pricing_view(grpc_limits or StreamLimits()),
        "webhooks": webhook_pricing_view(),
    }
    if trade_builders is not None:
        document["trade_builders"] = dict(trade_builders)
    return document


def capabilities_document(profile: ServiceProfile) -> dict[str, Any]:
    return {"ok": True, "service_profile": profile.capabilities_view()}

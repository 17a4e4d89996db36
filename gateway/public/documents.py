"""The public documents: ``/health``, ``/pricing``, ``/capabilities``. Pure functions of state (``/pricing``'s
one node read, the SOL/USD rate when its cache is stale, is one read however many callers ask at once:
:class:`gateway.trades.sol_usd.CachedRate`)."""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from gateway.bulk.rules import BULK_CREDITS, MAX_BULK_ITEMS
from gateway.core.jsonrpc import MAX_BATCH
from gateway.core.methods import MethodClass, PriceTable, Registry
from gateway.core.node_health import FINALIZED, PoolView
from gateway.core.subscriptions import UNAVAILABLE, Limits, pricing_view
from gateway.core.upstreams import Role, Tier
from gateway.grpc.rules import StreamLimits
from gateway.grpc.rules import pricing_view as grpc_pricing_view
from gateway.pipeline.http import REST_MAX_BODY_BYTES, RPC_MAX_BODY_BYTES
from gateway.rpc.planning import MAX_PARAMS_DEPTH
from gateway.signals.rules import KINDS
from gateway.webhooks.rules import pricing_view as webhook_pricing_view
from geyser_proto.filters import DEFAULT_LIMITS as DEFAULT_FILTER_LIMITS
from geyser_proto.filters import MAX_PUBKEY_CHARS, MAX_SIGNATURE_CHARS


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
    #: Whether a node is in service for a role: the flags of :data:`ROLE_FLAGS` follow it (None: as set)
    serves: Callable[[Role], bool] | None = None

    def current_services(self) -> dict[str, bool]:
        serves = self.serves
        if serves is None:
            return dict(self.services)
        return {**self.services, **{flag: self.services[flag] and serves(role) for flag, role in ROLE_FLAGS.items()}}

    def health_view(self) -> dict[str, Any]:
        return {"auth": dict(self.auth), "services": self.current_services()}

    def capabilities_view(self) -> dict[str, Any]:
        return {
            "auth": dict(self.auth),
            "services": {**self.current_services(), "archive_history": self.archive_history},
            "signals": dict(self.signals),
        }


#: The services that are there exactly while a node is in service for their role.
ROLE_FLAGS = {"hot_rpc": Role.READS, "send": Role.SENDS, "heavy_indexed_rpc": Role.HEAVY}


def health_document(
    view: PoolView, profile: ServiceProfile, started_at: float, keys: Mapping[str, Any] | None = None
) -> tuple[int, dict[str, Any]]:
    """The Health document and its HTTP status from the pool's ``view``: ``ok`` while a primary node serves
    reads, ``degraded`` (``fallback_active``) while only fallback nodes do, 503 ``starting`` while none
    does (docs/operations.md: a load balancer probing it). ``keys``: the service keys this node serves
    (``AuthServices.keys_view``)."""
    now = time.time()
    node = view.best()
    primary = node is not None and node.node.tier is Tier.PRIMARY
    doc: dict[str, Any] = {"agave_healthy": primary, "service_profile": profile.health_view()}
    if keys is not None:
        doc["keys"] = dict(keys)
    status = "ok" if primary else "degraded" if node is not None else "starting"
    doc["status"] = status
    doc["paid_traffic_ready"] = node is not None
    if status == "degraded":
        doc["fallback_active"] = True
    if node is not None:
        doc.update(
            solanaSlot=node.slots[FINALIZED] if node.slots else None,
            solanaBlockHeight=node.heights[FINALIZED] if node.heights else None,
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
            "charged": "landing_credits when confirmed; base_fee_credits otherwise (it landed and failed, or it "
            "was sent and never landed); nothing only when its preflight refused it (nothing was sent)",
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


def capabilities_document(
    profile: ServiceProfile, ws_limits: Limits | None = None, grpc_limits: StreamLimits | None = None
) -> dict[str, Any]:
    """``service_profile`` as the interface gives it, and ``limits``: the bounds a client must stay within
    (docs/api.md, Limits), as configured."""
    return {
        "ok": True,
        "service_profile": profile.capabilities_view(),
        "limits": limits_view(ws_limits or Limits(), grpc_limits or StreamLimits()),
    }


def limits_view(ws: Limits, grpc: StreamLimits) -> dict[str, Any]:
    """What a request, a socket and a stream may hold (past each: the refusal docs/api.md names)."""
    return {
        "jsonrpc": {
            "max_batch": MAX_BATCH,
            "max_body_bytes": RPC_MAX_BODY_BYTES,
            "max_params_depth": MAX_PARAMS_DEPTH,
            "max_bulk_items": MAX_BULK_ITEMS,
        },
        "rest": {"max_body_bytes": REST_MAX_BODY_BYTES},
        "websocket": {
            "max_message_bytes": ws.max_message_bytes,
            "messages_per_second": ws.messages_per_second,
            "message_burst": ws.message_burst,
            "max_subscriptions": ws.max_subscriptions,
            "max_queued_messages": ws.max_queued,
            "max_queued_bytes": ws.max_queued_bytes,
            "max_connections_per_account": ws.max_connections_per_account,
            "max_connections_per_address": ws.max_connections_per_address,
        },
        "grpc": {
            "max_request_bytes": DEFAULT_FILTER_LIMITS.max_request_bytes,
            "max_request_keys": DEFAULT_FILTER_LIMITS.max_request_keys,
            "max_key_chars": MAX_PUBKEY_CHARS,
            "max_signature_chars": MAX_SIGNATURE_CHARS,
            "max_streams_per_account": grpc.max_streams_per_account,
            "max_streams_per_address": grpc.max_streams_per_address,
            "max_stream_opens_per_minute": grpc.max_opens_per_minute,
            "max_filters_per_account": grpc.account_filters,
        },
    }

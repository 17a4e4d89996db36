"""One replica's gateway, built from settings: the stages, the endpoints and the state they share.

The one place that wires. The JSON-RPC methods and their handlers come from every feature's declaration
(``gateway/app/features.py``: the app hands itself to their builders as the host they read); transports
(``gateway.transports``) only mount what is built here, and tests build a :class:`GatewayApp` to run
exactly what a replica runs. No Ray here: the Serve deployment (``gateway.runtime.ingress``) wraps this
in the HTTP transport.
"""

from __future__ import annotations

import time
from typing import Any

from solders.pubkey import Pubkey

from gateway.access.endpoints import AccessEndpoints, SpendCapEndpoints
from gateway.access.guard import follow_changes, guard_of
from gateway.access.stage import AccessMethods
from gateway.app.features import AppSettings, method_registry
from gateway.auth.authenticator import Only
from gateway.auth.endpoints import AccountEndpoints
from gateway.auth.stage import AuthStage
from gateway.base.stopping import Step, stop_in_steps
from gateway.bulk.endpoints import BulkEndpoint, bulk_endpoints
from gateway.bulk.metering import BulkMetering
from gateway.callers.entry import Entry
from gateway.callers.services import AccountServices
from gateway.core.client_address import TrustedProxies
from gateway.core.errors import ProxyError
from gateway.core.methods import MethodClass, PriceTable
from gateway.core.subscriptions import NATIVE, SIGNAL_SUBSCRIBE, Limits
from gateway.core.upstreams import Role
from gateway.credits.confirm import ConfirmDepositEndpoint, DepositServices
from gateway.credits.errors import insufficient_credits, spend_cap_reached
from gateway.credits.stage import CreditHeaders, MeteringStage
from gateway.grpc.server import limits_of
from gateway.limits.addresses import IpLimits
from gateway.limits.slices import ShardClient
from gateway.node.http import Upstream
from gateway.node.pool import NodePool
from gateway.node.pubsub import UpstreamPubSub
from gateway.node.streams import PoolStreamNodes
from gateway.pipeline.readiness import Readiness
from gateway.pipeline.stages import Handler, Stage, compose, error_boundary
from gateway.public.documents import ServiceProfile
from gateway.rpc.forward import NO_NODE_RETRY_S, Forwarder, ParseStage
from gateway.rpc.response_cache import ResponseCache
from gateway.rpc.store import SharedResponses
from gateway.sending.block_engine import BlockEngine
from gateway.sending.racers import LocalRacers, Racers
from gateway.sending.relay import RelayRoute
from gateway.signals.feed import SignalFeed
from gateway.signals.store import SignalLog
from gateway.storage.channels import RECALL, REVOKED_KEYS, Channel
from gateway.storage.connections import Connections, Pool, warn_unless_noeviction
from gateway.storage.seats import Seats
from gateway.trades.fees import TradeFees
from gateway.trades.sol_usd import CachedRate, ConfiguredRate, PoolRate, RateSource
from gateway.webhooks.management import WebhookEndpoints
from gateway.x402.paid import PaidCalls
from gateway.x402.settle import X402Settle


class GatewayApp:
    """Args:
    settings: validated settings (with the embedded parts' URLs filled in by the stack).
    racers: who runs sendAndConfirm's races (the send-racer actors under ``gateway up``); default:
        this replica (:class:`LocalRacers`).
    shards: the account-shard actors that own rate and concurrency (``gateway up``); default: each
        replica enforces its share (:class:`Limiter`).
    auth_options: extra :class:`AuthServices` options (tests pass short lifetimes and hooks).
    """

    def __init__(
        self,
        settings: AppSettings,
        racers: Racers | None = None,
        shards: ShardClient | None = None,
        **auth_options: Any,
    ) -> None:
        self.settings = settings
        self.started_at = time.time()
        self.prices = PriceTable.default().with_overrides(settings.pricing)
        self.profile = ServiceProfile()
        self.profile.services["yellowstone_grpc"] = settings.grpc_stream  # gateway up serves it exactly then
        self.profile.services["x402_settle"] = settings.x402_settle  # POST /x402/settle (docs/api.md, x402)
        # webhooks may post to http:// and loopback or private hosts (docs/api.md, Webhooks)
        self.profile.services["webhook_private_targets"] = settings.webhook_allow_private
        self.upstream = NodePool.from_settings(settings)  # the nodes, their health read from the pool's owner
        self.profile.serves = self.upstream.serves  # hot_rpc, send, heavy_indexed_rpc: a node in service for each
        self.readiness = Readiness(self.upstream, NO_NODE_RETRY_S)  # 503 while no node serves reads
        trusted = TrustedProxies.parse(settings.trusted_proxies)
        self.access = guard_of(trusted, lambda: self.auth)  # the account access rules (docs/api.md)
        # _unfunded reads the meter, built with auth: it is called only once both exist
        self.callers = AccountServices(
            settings, shards, sweeps_expiry=True, access=self.access, unfunded=self._unfunded, **auth_options
        )
        self.auth, self.meter, self.limiter = self.callers.auth, self.callers.meter, self.callers.limiter
        follow_changes(self.auth, self.access)
        self.metering = MeteringStage(self.meter, self.limiter, self.top_up)
        self.ip_limits = IpLimits(settings.ip_limits, trusted, replicas=settings.share_replicas)
        self.access_methods = AccessMethods(self.access, self.limiter)
        # open WebSockets and CSV exports per account, and sockets per address: over the service once Redis is up
        self.seats = Seats()
        # usage totals per method class: the methods' registry is built last (from the whole app), so asked late
        self.accounts = AccountEndpoints(
            self.auth, self.seats, settled_read=self.meter.settled_read, class_of=self._class_of
        )
        self.stop_troubles: list[str] = []  # the steps of the last stop that failed or hung
        self.deposits = DepositServices.from_settings(
            settings, self.upstream, self.db, after_credit=self.callers.notices.credited
        )
        self.confirm_deposit = ConfirmDepositEndpoint(self.deposits)
        self.x402_settle = X402Settle.from_settings(
            settings, self.auth.keys, self.upstream, self.db, self.ip_limits.address
        )
        self.paid_calls = PaidCalls(self.x402_settle, self.deposits, lambda: self.auth.terms, self.limit("x402_settle"))
        self.webhooks = WebhookEndpoints.from_settings(self.db, settings, self.top_up)
        self.engine = BlockEngine.from_settings(settings)
        self.racers = racers or LocalRacers(settings)
        self.trade_fees = TradeFees(
            self.prices.price(MethodClass.TRADE_BUILD) or 0, settings.trade_notional_fee_bps, settings.credits_per_usdc
        )
        self.sol_usd: RateSource = self._sol_usd_rate()
        self.methods = method_registry(self)  # every feature's; a local method not registered is refused free
        self.access_endpoints = AccessEndpoints(
            self.access, [*(spec.name for spec in self.methods), *NATIVE, SIGNAL_SUBSCRIBE], self._revoked_keys
        )
        self.spend_cap_endpoints = SpendCapEndpoints(self.db, self._recall_channel)
        self.cache = self._response_cache()
        self.forwarder = Forwarder(self.upstream, self.methods.handlers, self.cache)
        self.rpc: Handler = compose([error_boundary, *self.rpc_stages()], self.forwarder)
        _, *after_auth = self.rpc_stages()  # what WebSocket and MCP run after their one authentication
        self.entry = Entry(self.auth, self.meter, compose([error_boundary, *after_auth], self.forwarder))
        self.bulk: dict[str, BulkEndpoint] = bulk_endpoints(self.upstream, BulkMetering(self.metering))
        self.pubsub = UpstreamPubSub(  # connects on first use, to a node of the pool serving PubSub; moves
            PoolStreamNodes(self.upstream, Role.PUBSUB),
            ca_file=settings.upstream_ca_file,
            silence_s=settings.upstream_stream_silence_s,
        )
        self.grpc_limits = limits_of(settings)  # what /pricing shows of the gRPC stream's server processes
        self.ws_limits = Limits(
            max_connections_per_account=settings.ws_max_connections_per_account,
            max_connections_per_address=settings.ws_max_connections_per_address,
        )
        self.signal_log: SignalLog | None = None  # the signal log and the replica's feed, once started with Redis
        self.signal_feed: SignalFeed | None = None

    def _sol_usd_rate(self) -> RateSource:
        """The pool's live rate with the configured one as its fallback, or the configured one alone."""
        configured = ConfiguredRate(self.settings.trade_sol_usd_micro)
        pool = self.settings.trade_sol_usd_pool
        if not pool:
            return configured
        live = PoolRate(
            self.upstream, Pubkey.from_string(pool), Pubkey.from_string(self.settings.usdc_mint), configured
        )
        return CachedRate(live, self.settings.trade_sol_usd_ttl_s)

    def _response_cache(self) -> ResponseCache | None:
        settings = self.settings
        if not settings.response_cache:
            return None
        ttl_s = settings.response_cache_unfinalized_ttl_ms / 1000
        return ResponseCache(settings.response_cache_entries, ttl_s, lambda: self.upstream.finalized_slot)

    def upstream_for(self, role: Role) -> Upstream:
        return self.upstream.role(role)

    def relay_stages(self, method: str, from_body: bool) -> list[Stage]:
        """The stages of a ``/relay/*`` route (before ``self.forwarder``): JSON-RPC's, pinned to ``method``."""
        auth, *rest = self.rpc_stages()
        return [auth, RelayRoute(method, from_body), *rest]

    def rpc_stages(self) -> list[Stage]:
        """The JSON-RPC stages between the error boundary and the forwarder, in order."""
        return [
            AuthStage(
                self.auth, require_funds=True, payment=self.paid_calls
            ),  # x402: PAYMENT-SIGNATURE pays (gateway.x402.paid)
            CreditHeaders(self.metering),
            self.readiness,
            ParseStage(self.methods, self.prices),
            self.access_methods,  # an account's method rules, per item, before anything is metered
            self.metering,
        ]

    def bulk_stages(self) -> list[Stage]:
        """The stages of a ``/bulk/*`` route: JSON-RPC's auth (an account needed), credit headers and
        readiness; the endpoint meters its items itself (:mod:`gateway.bulk.metering`)."""
        return [AuthStage(self.auth, require_funds=True), CreditHeaders(self.metering), self.readiness]

    async def trade_pricing(self) -> dict[str, Any]:
        """The trade builders' part of ``GET /pricing``: build fee, notional share and the SOL/USD rate."""
        return self.trade_fees.document(await self.sol_usd.rate())

    def limit(self, group: str) -> Stage:
        """The per-address limit of ``group`` (settings ``ip_limits``)."""
        return self.ip_limits.stage(group)

    def account_stage(self, only: Only | None = None, *, require_account: bool = False) -> AuthStage:
        """The auth stage of the account routes: any credential mode (or ``only`` one), no account needed
        (unless ``require_account``: 402 with the payment terms without one)."""
        return AuthStage(self.auth, require_account=require_account, only=only)

    @property
    def conn(self) -> Connections:
        """The stores' connections (open once started)."""
        return self.callers.conn

    def db(self) -> Pool | None:
        """The PostgreSQL pool (None until started: the builders that keep it read it per call)."""
        return self.conn.db

    def _revoked_keys(self) -> Channel | None:
        """The channel a change of the access rules is announced on (once Redis is open)."""
        return Channel(self.conn.redis, REVOKED_KEYS) if self.conn.redis is not None else None

    def _recall_channel(self) -> Channel | None:
        """The channel a new spend cap asks every process's leases of the account back on (docs/api.md)."""
        return Channel(self.conn.redis, RECALL) if self.conn.redis is not None else None

    async def startup(self) -> None:
        await self.callers.start()
        self.access.pool = self.conn.db
        if self.conn.redis is not None:
            await warn_unless_noeviction(self.conn.redis)
            self.seats.start(self.conn.redis)
            if self.cache is not None:
                self.cache.shared = SharedResponses(self.conn.redis)
            self.signal_log = SignalLog(self.conn.redis, retention=self.settings.signal_retention_events)
            self.signal_feed = SignalFeed(self.signal_log)
            self.signal_feed.start()
        await self.upstream.start()

    async def shutdown(self) -> None:
        """Stop in steps (:mod:`gateway.base.stopping`): one that fails or hangs does not keep the meter from
        settling; the names of those that went wrong are kept in ``stop_troubles``."""
        engine, feed, cache = self.engine, self.signal_feed, self.cache
        steps: list[Step] = [
            ("node pubsub", self.pubsub.close),
            ("access rules", self.access.stop),
            ("send racers", self.racers.close),
            *([("block engine", engine.close)] if engine is not None else []),
            *self.callers.first_stop_steps(),
            ("connection seats", self.seats.stop),
            *([("signal feed", feed.stop)] if feed is not None else []),
            *([("response cache", cache.close)] if cache is not None else []),
            ("node pool", self.upstream.close),
            *self.callers.last_stop_steps(),
        ]
        self.stop_troubles = await stop_in_steps(steps)

    def _class_of(self, method: str) -> str | None:
        """A method's class, for the usage totals (the registry is built after the account endpoints)."""
        return self.methods.class_of(method)

    def _unfunded(self, pubkey: str) -> ProxyError | None:
        """The 402 of an account the meter knows, from a fresh store answer, cannot pay even one credit."""
        if not self.meter.short_of(pubkey, 1):
            return None
        acct = self.meter.accounts.get(pubkey)
        if acct is not None and acct.capped:  # the daily spend cap, not the balance (docs/api.md)
            return spend_cap_reached()
        return insufficient_credits(1, self.meter.remaining(pubkey), self.top_up(pubkey))

    def top_up(self, pubkey: str | None) -> dict[str, Any]:
        """How to pay, for a 402's ``data`` (the terms are known once auth has started)."""
        terms = self.auth.terms
        return terms.rpc_data(pubkey) if terms is not None else {}

    @property
    def ready(self) -> bool:
        return self.upstream.ready

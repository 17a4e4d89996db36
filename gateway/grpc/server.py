"""One gRPC stream server process: the ``grpc.aio`` server on ``grpc_port`` and what it needs, from settings.

Built like :class:`gateway.app.replica.GatewayApp` builds a replica (the same auth services, a meter of its
own holding credit leases like a replica's, the account rate limits), plus the process's fan-out, its
pool of nodes (:class:`gateway.node.pool.NodePool`: their health from the cluster's ``upstream-health``
actor in a cluster, else its own) and its one upstream geyser subscription, on a node of the pool
serving ``geyser`` and moving with it (:mod:`gateway.node.geyser`). Run by the ``grpc-stream-N`` actors
(``gateway/grpc/stream_actor.py``) under ``gateway up``, and in process by the tests and the benchmark::

    server = GrpcStreamServer(settings)
    port = await server.start()        # listening; TLS when grpc_tls_cert and grpc_tls_key are set
    ...
    await server.stop()                # streams end UNAVAILABLE, credit usage settled, stores and pool closed
"""

from __future__ import annotations

import logging
from typing import Any

import grpc

from gateway.access.guard import follow_changes, guard_of
from gateway.base import process_gc
from gateway.base.stopping import stop_in_steps
from gateway.callers.services import AccountServices, AccountSettings
from gateway.core.client_address import TrustedProxies
from gateway.core.upstreams import Role
from gateway.grpc.budget import FilterBudget
from gateway.grpc.replay import ReplayLog
from gateway.grpc.rules import StreamLimits, account_share
from gateway.grpc.service import GeyserGateway, ServiceDeps
from gateway.grpc.settings import GrpcSettings
from gateway.limits.slices import ShardClient
from gateway.node.geyser import MAX_MESSAGE_BYTES, UpstreamGeyser
from gateway.node.pool import NodePool
from gateway.node.streams import PoolStreamNodes
from geyser_proto.fanout import Fanout
from geyser_proto.filters import DEFAULT_LIMITS, FilterLimits
from geyser_proto.streaming import service_handler

log = logging.getLogger(__name__)

STOP_GRACE_S = 1.0


class StreamServerSettings(AccountSettings, GrpcSettings):
    """What a gRPC stream server reads: the stream's settings and what knowing and billing callers needs."""


def limits_of(settings: GrpcSettings) -> StreamLimits:
    return StreamLimits(
        max_streams_per_account=settings.grpc_max_streams_per_account,
        max_streams_per_address=settings.grpc_max_streams_per_address,
        billing_interval_s=settings.grpc_billing_interval_s,
        ping_interval_s=settings.grpc_ping_interval_s,
        max_queued=settings.grpc_max_queued,
        max_filters=settings.upstream_grpc_max_filters,
        account_filters=account_share(settings.upstream_grpc_max_filters, settings.grpc_account_filter_share),
        max_opens_per_minute=settings.grpc_max_stream_opens_per_minute,
    )


def replay_log_of(settings: GrpcSettings) -> ReplayLog | None:
    """The process's replay log (``grpc_replay_*``; none when ``grpc_replay_slots`` is 0)."""
    if settings.grpc_replay_slots == 0:
        return None
    return ReplayLog(settings.grpc_replay_slots, settings.grpc_replay_max_bytes, settings.grpc_replay_max_updates)


def tune_gc(settings: GrpcSettings) -> None:
    """The replicas' garbage-collector setting (``gc_young_threshold``, docs/performance.md) for the process
    a server runs in: a stream's updates are short-lived allocations like a replica's requests."""
    process_gc.tune_gc(settings.gc_young_threshold)


def server_options(reuse_port: bool) -> list[tuple[str, Any]]:
    """HTTP/2 keepalive finds a vanished client within 30 s (so its stream, and its billing, end);
    ``reuse_port`` lets several server processes share the port."""
    return [
        ("grpc.so_reuseport", 1 if reuse_port else 0),
        ("grpc.keepalive_time_ms", 20_000),
        ("grpc.keepalive_timeout_ms", 10_000),
        ("grpc.http2.min_ping_interval_without_data_ms", 5_000),
        ("grpc.keepalive_permit_without_calls", 1),
        # twice the largest request served: one a little over it gets a clear INVALID_ARGUMENT, none is
        # parsed past this (docs/api.md, gRPC limits)
        ("grpc.max_receive_message_length", 2 * DEFAULT_LIMITS.max_request_bytes),
        ("grpc.max_send_message_length", MAX_MESSAGE_BYTES),
    ]


class GrpcStreamServer:
    """Args:
    settings: resolved settings (``database_url``, ``redis_url`` and a node serving geyser set).
    reuse_port: share ``grpc_port`` with other server processes (``grpc_servers`` > 1).
    port: listen here instead of ``grpc_port`` (0: a free port; tests).
    auth_options: extra :class:`AuthServices` options (tests).
    shards: the account-shard actors (``account_shards`` > 0): each account's rate and concurrency are then
        the same whole shared with the ingress replicas, not a share of this process's own.
    """

    def __init__(
        self,
        settings: StreamServerSettings,
        *,
        reuse_port: bool = False,
        port: int | None = None,
        shards: ShardClient | None = None,
        **auth_options: Any,
    ) -> None:
        geyser = settings.geyser_node()
        if geyser is None or geyser.grpc_url is None:
            raise ValueError(
                "the gRPC stream needs a node serving geyser (upstreams, or upstream_grpc_url) to re-serve"
            )
        self.settings = settings
        self.port = settings.grpc_port if port is None else port
        self.reuse_port = reuse_port
        trusted = TrustedProxies.parse(settings.trusted_proxies)  # whose x-forwarded-for metadata is believed
        self.access = guard_of(trusted, lambda: self.auth)  # the access rules
        # sweeps_expiry: the replicas sweep; the guard asks self.auth only at check time (guard_of)
        self.callers = AccountServices(settings, shards, sweeps_expiry=False, access=self.access, **auth_options)
        self.auth, self.meter, self.limiter = self.callers.auth, self.callers.meter, self.callers.limiter
        follow_changes(self.auth, self.access)
        self.fanout = Fanout()
        self.replay_log = replay_log_of(settings)
        self.pool = NodePool.from_settings(settings, connections=4)  # its health: the cluster's owner, or its own
        self.upstream = UpstreamGeyser(  # on a node of the pool serving geyser, moving when it fails
            PoolStreamNodes(self.pool, Role.GEYSER),
            self.fanout,
            token=settings.upstream_grpc_token,  # for a node naming no grpc_token of its own
            log=self.replay_log,
            ca_file=settings.upstream_ca_file,
            silence_s=settings.upstream_stream_silence_s,
        )
        limits = limits_of(settings)
        self.budget = FilterBudget(limits, whole_feed=self.replay_log is not None)
        deps = ServiceDeps(self.auth, self.meter, self.limiter, self.fanout, self.upstream, limits, self.budget)
        deps.trusted = trusted  # the per-address stream cap's address is the access rules' (service.call_headers)
        if self.replay_log is not None:
            deps.filter_limits, deps.replay_log = FilterLimits(from_slot=True), self.replay_log
        self.service = GeyserGateway(deps)
        self._server: grpc.aio.Server | None = None

    @property
    def tls(self) -> bool:
        return self.settings.grpc_tls_cert is not None

    async def start(self) -> int:
        """Open the stores, the pool of nodes, the upstream subscription and the port; returns the port."""
        s = self.settings
        conn = await self.callers.start(pool_size=4)
        await self.pool.start()  # its first view, before the subscription picks a node
        if conn.db is not None:
            self.service.deps.overrides.start(conn.db)
        self.access.pool = conn.db
        if conn.redis is not None:
            self.service.deps.seats.start(conn.redis)
            self.service.deps.clocks.start(conn.redis)
        self.upstream.start()
        server = grpc.aio.server(options=server_options(self.reuse_port))
        server.add_generic_rpc_handlers((service_handler(self.service, "this gateway"),))
        address = f"[{s.host}]:{self.port}" if ":" in s.host else f"{s.host}:{self.port}"
        if s.grpc_tls_cert is not None and s.grpc_tls_key is not None:
            pair = (s.grpc_tls_key.read_bytes(), s.grpc_tls_cert.read_bytes())
            self.port = server.add_secure_port(address, grpc.ssl_server_credentials([pair]))
        else:
            self.port = server.add_insecure_port(address)
        await server.start()
        self._server = server
        geyser = [node.name for node in self.pool.stream_nodes(Role.GEYSER)]
        log.info(
            "gRPC stream on %s:%d (%s), upstream geyser nodes in service: %s",
            s.host,
            self.port,
            "TLS" if self.tls else "plaintext",
            ", ".join(geyser) or "none yet",
        )
        return self.port

    async def stop(self) -> None:
        """Stop in steps (:mod:`gateway.base.stopping`): one that fails or hangs does not keep the meter from
        settling what the streams were charged."""
        if self._server is not None:
            await self._server.stop(grace=STOP_GRACE_S)
            self._server = None
        await stop_in_steps(
            [
                ("geyser upstream", self.upstream.stop),
                ("node pool", self.pool.close),
                ("access rules", self.access.stop),
                *self.callers.first_stop_steps(),
                ("connection seats", self.service.deps.seats.stop),
                ("stream clocks", self.service.deps.clocks.stop),  # the ended streams' carries reach Redis
                *self.callers.last_stop_steps(),
            ]
        )

    def status(self) -> dict[str, Any]:
        """What the process serves (for the actor's status and the tests)."""
        return {
            "port": self.port,
            "tls": self.tls,
            "streams": len(self.fanout.members),
            "upstream_connected": self.upstream.connected,
            "upstream_node": self.upstream.node_name,  # its name only: a URL may hold a provider's key
            "upstream_moves": self.upstream.moves,
            "upstream_gaps": self.upstream.gaps,
            "upstream_updates": self.upstream.updates,
            "replay": None if (log := self.replay_log) is None else replay_status(log),
        }


def replay_status(log: ReplayLog) -> dict[str, int | None]:
    return {"oldest": log.oldest(), "newest": log.newest, "updates": log.count, "bytes": log.nbytes}

"""Settings: environment variables (``GATEWAY_*``) and an optional TOML file, validated at start.

Precedence, highest first: explicit arguments, environment, the TOML file named by ``GATEWAY_CONFIG``
(or ``--config``), defaults. ``RAY_ADDRESS`` is read as is, as Ray users expect. A setting left empty
means "use the embedded part": embedded PostgreSQL, embedded Redis, the local devnode, a local Ray.
"""

from __future__ import annotations

import ipaddress
import math
import os
from pathlib import Path
from typing import Annotated, Any, Literal, Self
from urllib.parse import urlparse

from pydantic import AliasChoices, BaseModel, Field, ValidationError, ValidationInfo, field_validator, model_validator
from pydantic_settings import (
    BaseSettings,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
    TomlConfigSettingsSource,
)

from gateway.core.errors import ConfigError as ConfigError  # defined in the kernel so gateway.keys raises it too
from gateway.signals.rules import DEFAULT_LARGE_SWAP_LAMPORTS, DEFAULT_SIGNAL_PROGRAMS, is_pubkey
from gateway.webhooks.rules import MAX_WATCHED_ADDRESSES

USDC_MAINNET_MINT = "EPjFWdd5AufqSSqeM2qN1xzybapC8G4wEGGkZwyTDt1v"
MAINNET = "solana-mainnet"
#: The node when none is configured and no stack filled one in (the devnode's default port).
DEFAULT_UPSTREAM = "http://127.0.0.1:8899"
DEFAULT_UPSTREAM_WS = "ws://127.0.0.1:8900"  # Solana's convention: the RPC port + 1
#: The SOL/USDC pool the embedded devnode hosts (devnode/sol_usd_pool.py; a test checks the two agree).
DEVNODE_SOL_USD_POOL = "HVXZega2t3QuANhHfnZRCvXtR5XQYLqxnrYcJMC96gxh"
#: The network name of the embedded local chain (test USDC, no value).
DEVNODE = "devnode"
Port = Annotated[int, Field(ge=1, le=65535)]
SendLeg = Literal["local_rpc", "jito", "tpu_quic"]
SEND_LEGS: tuple[SendLeg, ...] = ("local_rpc", "jito", "tpu_quic")


def _url_with_scheme(value: str | None, schemes: tuple[str, ...], name: str) -> str | None:
    if value is None or value == "":
        return None
    parsed = urlparse(value)
    if parsed.scheme not in schemes or not (parsed.netloc or parsed.path):
        raise ValueError(f"{name} must be a URL starting with {' or '.join(s + '://' for s in schemes)}")
    return value


class IngressAutoscaling(BaseModel):
    """Serve's autoscaling of the ingress replicas (``ingress_autoscaling``): between ``min_replicas`` and
    ``max_replicas``, aiming at ``target_ongoing_requests`` requests in flight per replica."""

    model_config = {"extra": "forbid"}

    min_replicas: int = Field(
        1, ge=1, le=64, description="Replicas always running (at least one: a replica serves the port)."
    )
    max_replicas: int = Field(ge=1, le=64, description="Replicas at most; the replica-local shares divide by it.")
    target_ongoing_requests: float = Field(
        32.0,
        gt=0,
        le=100_000,
        description="Requests in flight per replica Serve scales towards; every open WebSocket counts as one. "
        "32: half of the 64 connections at which one replica gave its best throughput (docs/performance.md).",
    )
    upscale_delay_s: float = Field(30.0, ge=0, le=3_600, description="Load above target this long adds replicas.")
    downscale_delay_s: float = Field(
        600.0, ge=0, le=86_400, description="Load below target this long removes replicas (each drains first)."
    )
    look_back_period_s: float = Field(30.0, gt=0, le=3_600, description="The window the load is averaged over.")
    metrics_interval_s: float = Field(
        10.0, gt=0, le=600, description="How often each replica reports its requests in flight to Serve."
    )

    @model_validator(mode="after")
    def _check_range(self) -> Self:
        if self.min_replicas > self.max_replicas:
            raise ValueError(f"min_replicas ({self.min_replicas}) is more than max_replicas ({self.max_replicas})")
        return self


class IpLimit(BaseModel):
    """A per-client-address token bucket: ``rps`` requests per second, up to ``burst`` at once."""

    model_config = {"extra": "forbid"}

    rps: float = Field(gt=0, le=100_000)
    burst: int = Field(ge=1, le=1_000_000)


#: Per-address limits of the routes a caller reaches before (or without) paying. Groups: ``session``
#: (/auth/*), ``account_create`` (POST /account/api-key: creates accounts), ``account_read``
#: (/account/info, /ledger, /history), ``deposit_confirm`` (POST /account/confirm-deposit: node reads),
#: ``webhooks`` (the /webhooks management routes), ``x402_settle`` (POST /x402/settle: node sends, and
#: sponsored ones spend the fee payer's SOL), ``signals`` (GET /signals/recent: public Redis reads),
#: ``auth_failures`` (failed authentications on every transport: each unknown API key is a database lookup).
#: Request slots of a replica that open WebSockets can never take (see ``max_ongoing_requests``).
HTTP_HEADROOM = 256

DEFAULT_IP_LIMITS: dict[str, IpLimit] = {
    "session": IpLimit(rps=5, burst=30),
    "account_create": IpLimit(rps=0.2, burst=10),
    "account_read": IpLimit(rps=10, burst=50),
    "deposit_confirm": IpLimit(rps=1, burst=10),
    "webhooks": IpLimit(rps=5, burst=30),
    "x402_settle": IpLimit(rps=0.1, burst=5),
    "signals": IpLimit(rps=5, burst=30),
    "auth_failures": IpLimit(rps=1, burst=100),
}


class Settings(BaseSettings):
    """Everything an operator can set. Field descriptions are the reference documentation."""

    model_config = SettingsConfigDict(env_prefix="GATEWAY_", extra="forbid", validate_default=True)

    home: Path = Field(Path(".gateway"), description="Data dir: embedded databases, keys, devnode state.")
    host: str = Field("127.0.0.1", description="HTTP listen address of the Serve app.")
    port: Port = Field(8000, description="HTTP port (JSON-RPC, /ws, /mcp, REST).")
    grpc_port: Port = Field(10000, description="gRPC stream port (Yellowstone's geyser.Geyser service).")
    grpc_servers: int = Field(
        1,
        ge=0,
        le=16,
        description="gRPC stream server actors gateway up starts, all on grpc_port (the kernel spreads connections "
        "over them); each holds one upstream subscription. 0: no gRPC stream.",
    )
    grpc_tls_cert: Path | None = Field(
        None, description="PEM certificate chain of the gRPC port; with grpc_tls_key it serves TLS, else plaintext."
    )
    grpc_tls_key: Path | None = Field(None, description="PEM private key of grpc_tls_cert.")
    grpc_allow_plaintext_on_network: bool = Field(
        False,
        description="Serve the gRPC stream without TLS on a routable host (API keys in clear on the network): "
        "gateway up refuses to unless this is set (docs/operations.md, Network exposure).",
    )
    grpc_billing_interval_s: float = Field(
        60.0,
        gt=0,
        le=3600,
        description="An open Subscribe stream is billed again at the start of each interval after its first.",
    )
    grpc_max_streams_per_account: int = Field(
        10, ge=1, le=10_000, description="Open Subscribe streams per account over every gRPC server process."
    )
    grpc_max_streams_per_address: int = Field(
        40,
        ge=1,
        le=100_000,
        description="Open Subscribe streams from one client address over every gRPC server process (any accounts).",
    )
    grpc_max_stream_opens_per_minute: int = Field(
        30, ge=1, le=100_000, description="Subscribe streams one account may open per minute, over every gRPC server."
    )
    grpc_max_queued: int = Field(
        10_000,
        ge=10,
        le=10_000_000,
        description="Updates waiting for one stream (and at most 64 MiB) before a client too slow to read is cut off.",
    )
    grpc_ping_interval_s: float = Field(
        15.0, gt=0, le=300, description="A stream with nothing to send for this long gets a ping update."
    )
    grpc_replay_slots: int = Field(
        150,
        ge=0,
        le=10_000,
        description="The replay log of each gRPC server process: the node's whole feed over the newest this many "
        "slots, which a Subscribe request's from_slot replays (docs/api.md, gRPC). 0: no log, from_slot is "
        "UNIMPLEMENTED and the upstream subscription asks only for the streams' filters.",
    )
    grpc_replay_max_bytes: int = Field(
        256 * 2**20,
        ge=2**20,
        le=64 * 2**30,
        description="The replay log's bytes of updates (as the node sent them), whatever grpc_replay_slots says: "
        "the oldest slots go first.",
    )
    grpc_replay_max_updates: int = Field(
        500_000,
        ge=1_000,
        le=100_000_000,
        description="The replay log's updates, whatever grpc_replay_slots says (each costs about 40 bytes beyond its "
        "size): the oldest slots go first.",
    )
    grpc_account_filter_share: float = Field(
        0.25,
        gt=0,
        le=1,
        description="The part of upstream_grpc_max_filters one account's streams on a gRPC server process may use "
        "together, per kind (0.25: 16 of 64); a stream that would exceed it is refused RESOURCE_EXHAUSTED.",
    )
    upstream_grpc_max_filters: int = Field(
        64,
        ge=1,
        le=100_000,
        description="Filters of one kind (accounts, transactions) the node accepts in one Subscribe request: the "
        "budget of each gRPC server process's one upstream subscription (the devnode accepts 64; Yellowstone sets "
        "no limit unless its config does: set it to the node's).",
    )
    upstream_grpc_url: str | None = Field(
        None,
        description="The node's Yellowstone geyser endpoint (http:// or https://host:port) that the gRPC stream "
        "re-serves; empty: the devnode's in the embedded default, else no gRPC stream.",
    )
    upstream_grpc_token: str | None = Field(None, repr=False, description="x-token sent to upstream_grpc_url.")

    database_url: str | None = Field(None, description="PostgreSQL DSN; empty starts embedded PostgreSQL.")
    redis_url: str | None = Field(None, description="Redis URL (redis://, rediss://, unix://); empty: embedded.")
    upstream_rpc_url: str | None = Field(None, description="Solana node JSON-RPC URL; empty starts the devnode.")
    upstream_ws_url: str | None = Field(None, description="Solana node PubSub URL; derived from the RPC URL if empty.")
    upstream_max_answer_bytes: int = Field(
        64 << 20,
        ge=1 << 10,
        le=1 << 30,
        description="The most of one node answer a replica reads (decompressed); past it the call is answered "
        "-32012 and charged (docs/api.md, Limits).",
    )
    fallback_rpc_url: str | None = Field(None, description="Second node used while the first is unhealthy.")
    ray_address: str | None = Field(
        None,
        validation_alias=AliasChoices("RAY_ADDRESS", "GATEWAY_RAY_ADDRESS", "ray_address"),
        description="Ray cluster to join; empty starts a local Ray.",
    )
    metrics_export_port: int = Field(
        9400,
        ge=1,
        le=65535,
        description="The local Ray's Prometheus metrics port, on 127.0.0.1 (ops/prometheus.yml scrapes 9400; "
        "docs/operations.md).",
    )

    ingress_mode: Literal["proxy", "direct", "haproxy"] = Field(
        "haproxy",
        description="How HTTP reaches replicas: Serve's proxy, one replica on the port itself, or Ray's HAProxy.",
    )
    ingress_replicas: int = Field(
        1, ge=1, le=64, description="HTTP ingress replicas (a fixed count; leave it at 1 with ingress_autoscaling)."
    )
    ingress_replicas_per_node: int | None = Field(
        None,
        ge=1,
        le=64,
        description="At most this many ingress replicas on one Ray node (Serve's max_replicas_per_node); empty: "
        "no bound. With 1 on a cluster, each node runs at most one, so a lost node takes one replica; replicas "
        "past the nodes' room wait for a node.",
    )
    max_ongoing_requests: int = Field(
        1_280,
        ge=8,
        le=100_000,
        description="Per-replica concurrency cap of Serve: every HTTP request and every open WebSocket holds one "
        "slot. At least ws_max_connections + 256, so that sockets can never take the slots HTTP calls need.",
    )
    ws_max_connections: int = Field(
        1_024,
        ge=1,
        le=99_000,
        description="Open WebSockets per ingress replica; past it the upgrade is refused 503 with Retry-After.",
    )
    ws_max_connections_per_account: int = Field(
        32,
        ge=1,
        le=100_000,
        description="Open WebSockets per account over the service (counted at Redis over every replica); past it "
        "the socket closes 4003.",
    )
    ws_max_connections_per_address: int = Field(
        64,
        ge=1,
        le=100_000,
        description="Open WebSockets per client address over the service (counted at Redis over every replica); "
        "past it the upgrade is refused 429 with Retry-After, before any authentication.",
    )
    request_body_timeout_s: float = Field(
        10.0,
        ge=1,
        le=300,
        description="Deadline for a request's headers and body to arrive (HAProxy's, then the replica's); past it "
        "the request is answered 408 and the connection closed.",
    )
    access_log: bool = Field(
        False,
        description="Each replica logs one line per HTTP request (logger gateway.access): client address, method, "
        "path, status, duration, request id; never the query string, headers or body. Off: nothing is done.",
    )
    edge_secret: str | None = Field(
        None,
        repr=False,
        description="Shared by the bundled HAProxy (gateway-haproxy) and the replicas: only a request carrying it "
        "may name its client's address (X-Gateway-Client). Empty: gateway up makes one for each start. On a "
        "cluster, set the same value in every machine's environment before `ray start` (cluster.yaml).",
    )
    drain_s: float = Field(
        2.0,
        ge=0,
        le=300,
        description="How long a stopping ingress replica keeps serving requests already routed to it.",
    )
    health_poll_s: float = Field(2.0, gt=0, le=60, description="How often each replica probes the upstream.")
    gc_young_threshold: int = Field(
        50_000,
        ge=0,
        le=10_000_000,
        description="Allocations between young-generation GC passes in an ingress replica (0: Python's 700).",
    )

    devnode_rpc_port: Port = Field(8899, description="Devnode JSON-RPC port.")
    devnode_ws_port: Port = Field(8900, description="Devnode PubSub port.")
    devnode_grpc_port: Port = Field(10001, description="Devnode geyser gRPC port.")
    devnode_slot_ms: int = Field(400, ge=10, le=10_000, description="Devnode slot time.")
    devnode_retention_slots: int = Field(54_000, ge=10, description="Devnode block retention (~6 h at 400 ms).")
    devnode_feed: bool = Field(True, description="Generate launch-platform (pump.fun-shaped) traffic on the devnode.")

    network: str | None = Field(
        None,
        description="Network name shown to depositors; empty: 'devnode' when the embedded devnode is the "
        "upstream (a test chain with test USDC), else 'solana-mainnet'.",
    )
    usdc_mint: str = Field(USDC_MAINNET_MINT, description="The only mint whose deposits are credited.")
    deposit_address: str | None = Field(
        None,
        description="The deposit wallet's public key, advertised in 402 terms and watched for deposits. Empty: "
        "gateway up reads (or first creates) <home>/keys/deposit-wallet.json and hands its key to every process it "
        "starts; a serving process never creates a wallet and refuses to start without it.",
    )
    fee_payer_address: str | None = Field(
        None,
        description="The public key of <home>/keys/fee-payer.json, which co-signs sponsored x402 payments. Empty: "
        "resolved by gateway up like deposit_address; with x402_settle on a serving process refuses to start "
        "without it, or when that file holds another key; a machine without the file serves no sponsored payment "
        "(503) and never creates another fee payer.",
    )
    credits_per_usdc: int = Field(100_000, ge=1, description="Credits granted per 1 USDC (10^6 base units).")
    credit_expiry_seconds: int = Field(90 * 86_400, ge=60, description="Lifetime of a credit batch.")
    api_key_secret: str | None = Field(
        None,
        repr=False,
        description="64 hex chars: HMAC key of stored API-key hashes; shared by all machines of a cluster. "
        "Empty: gateway up reads (or first creates) <home>/keys/api-key-secret and hands it to every process it "
        "starts, on any machine.",
    )
    rate_limit_rps: int = Field(
        50,
        ge=1,
        le=1_000_000,
        description="Per-account requests/s (one per batch item); per-account override.",
    )
    concurrency_limit: int = Field(
        32, ge=1, le=100_000, description="Per-account calls in flight; per-account override."
    )
    lease_ttl_s: float = Field(
        30.0,
        ge=2,
        le=600,
        description="Credit lease lifetime; a crashed replica's lease holds credits this long.",
    )
    credit_flush_interval_s: float = Field(1.0, gt=0, le=60, description="Seconds between usage flushes.")
    credit_recall_wait_s: float = Field(
        0.25,
        ge=0,
        le=5,
        description="How long a call short of credits waits for other replicas to give back the credits their "
        "leases of the account hold (0: never asks; the credits then come back when those leases go idle).",
    )
    credit_expiry_check_s: float = Field(
        60.0, ge=0, description="How often each replica sweeps expired credit batches; 0 turns the sweep off here."
    )
    x402_settle: bool = Field(
        True,
        description="Serve POST /x402/settle (x402 payments, self-paid or with the fee paid by keys/fee-payer.json); "
        "off: it answers 503 SETTLEMENT_NOT_CONFIGURED.",
    )
    referral_bonus_percent: int = Field(10, ge=0, le=100, description="Default referral bonus on deposits.")
    deposit_poll_s: float = Field(2.0, gt=0, le=60, description="How often the deposit watcher polls the node.")
    signal_programs: list[str] = Field(
        default_factory=lambda: list(DEFAULT_SIGNAL_PROGRAMS),
        min_length=1,
        max_length=64,
        description="Programs the signal classifier watches (base58 ids); events are decoded for pump.fun and "
        "PumpSwap, any other counts for walletActivity. Default: pump.fun (classic and v2 curves) and PumpSwap.",
    )
    signal_large_swap_lamports: int = Field(
        DEFAULT_LARGE_SWAP_LAMPORTS, ge=1, description="A pump.fun trade of at least this many lamports is a largeSwap."
    )
    signal_wallets: list[str] = Field(
        default_factory=list,
        max_length=10_000,
        description="Wallets (base58) whose signed transactions on a watched program are walletActivity signals.",
    )
    signal_retention_events: int = Field(
        10_000, ge=100, le=1_000_000, description="Signal events kept in the Redis log (and per kind)."
    )
    signal_poll_s: float = Field(0.4, gt=0, le=60, description="How often the signal classifier polls the node.")
    webhook_allow_private: bool = Field(
        False,
        description="Development only: webhook URLs may be http:// and name loopback or private hosts "
        "(localhost, 10.x, 192.168.x...). Off: https:// to public addresses only. Unset, gateway up turns it on "
        "with the embedded devnode (no upstream_rpc_url) and leaves it off with a real node; set, it wins.",
    )
    webhook_dispatchers: int = Field(
        1, ge=0, le=64, description="Webhook dispatcher actors started by gateway up (0: jobs wait in PostgreSQL)."
    )
    webhook_retention_days: float = Field(
        30.0,
        gt=0,
        le=3650,
        description="Delivered, dead and cancelled webhook jobs older than this are deleted (hourly); a dead job "
        "can be replayed until then.",
    )
    webhook_actions_per_minute: int = Field(
        10,
        ge=1,
        le=10_000,
        description="Replays and resumes of webhooks one account may make a minute (429 past them): each makes "
        "deliveries due again, for free.",
    )
    webhook_paused_retention_days: float = Field(
        7.0,
        gt=0,
        le=3650,
        description="The waiting jobs of a webhook paused longer than this are cancelled (hourly; a charged one "
        "refunded): nobody delivers them, and the queue would keep them forever.",
    )
    send_retention_days: float = Field(
        30.0,
        ge=1,
        le=3650,
        description="sendAndConfirm records settled longer ago than this are deleted (hourly, by the send "
        "reconciler); getSendStatus answers null for them. Pending sends are never deleted.",
    )
    send_unproven_release_s: float = Field(
        600.0,
        ge=10,
        le=30 * 86_400,
        description="A pending sendAndConfirm the node can prove neither landed nor lost (its blocks since the hold "
        "purged: a limited ledger, a restart) is released this long after its hold, nothing charged, its "
        "settlement marked unproven.",
    )
    usage_retention_days: float = Field(
        90.0,
        ge=1,
        le=3650,
        description="Usage history rows (one per call, GET /account/history) older than this are deleted "
        "(hourly, by the send reconciler). Ledger entries and balances are kept.",
    )
    webhook_concurrency: int = Field(64, ge=1, le=10_000, description="Deliveries in flight at once per dispatcher.")
    webhook_per_subscription: int = Field(
        16,
        ge=1,
        le=10_000,
        description="Deliveries in flight at once to one subscription, over all dispatchers: a slow receiver "
        "cannot take every slot.",
    )
    webhook_per_account: int = Field(
        16,
        ge=1,
        le=10_000,
        description="Deliveries in flight at once to one account's subscriptions together, over all dispatchers: "
        "one account's slow receivers cannot take the slots other accounts' deliveries need.",
    )
    webhook_watched_addresses_per_account: int = Field(
        10,
        ge=1,
        le=MAX_WATCHED_ADDRESSES,
        description="Distinct addresses one account's transaction watches (account, program, my_account webhooks) "
        f"may follow, within the {MAX_WATCHED_ADDRESSES:,} the watcher follows over every account; a creation "
        "past it is refused 400.",
    )
    webhook_pause_after_dead: int = Field(
        10,
        ge=0,
        le=10_000,
        description="A webhook whose deliveries end dead this many times in a row (none delivered in between) is "
        "paused until POST /webhooks/{id}/resume (0: never).",
    )
    webhook_delivery_timeout_s: float = Field(
        10.0, gt=0, le=120, description="Time limit of one delivery attempt (connect, post, the answer's start)."
    )
    webhook_lease_s: float = Field(
        60.0,
        gt=0,
        le=3600,
        description="How long a dispatcher holds a claimed delivery; a dead dispatcher's are claimed again "
        "after it. At least twice webhook_delivery_timeout_s.",
    )

    @field_validator("webhook_lease_s")
    @classmethod
    def _check_webhook_lease(cls, value: float, info: ValidationInfo) -> float:
        timeout = info.data.get("webhook_delivery_timeout_s")
        if timeout is not None and value < 2 * timeout:
            raise ValueError(f"must be at least twice webhook_delivery_timeout_s ({timeout:g} s)")
        return value

    pricing: dict[str, int] = Field(
        default_factory=dict, description="Credits per method class, overriding the defaults."
    )
    mcp_allowed_origins: list[str] = Field(
        default_factory=list,
        description="Origins (scheme://host[:port]) whose browser pages may call /mcp besides the gateway's own "
        "(127.0.0.1, localhost or [::1] at its port); a request with any other Origin header is refused 403 (the "
        "MCP transport's DNS-rebinding rule). Agents send no Origin and are never refused for it. '*' allows "
        "every origin.",
    )
    trade_notional_fee_bps: int = Field(
        10,
        ge=0,
        le=1_000,
        description="executeSnipe / executeSell: the share of the trade's SOL notional billed on top of the build "
        "fee (the TRADE_BUILD class price, pricing.TRADE_BUILD, default 50 credits), in basis points (10 = 0.10%).",
    )
    trade_sol_usd_micro: int = Field(
        150_000_000,
        ge=1,
        le=1_000_000_000_000,
        description="The SOL/USD rate the trade builders convert their notional share to credits at when the "
        "SOL/USD pool (trade_sol_usd_pool) cannot be read, in micro-USD per SOL (150000000 = $150.00; /pricing: "
        "rate_source configured).",
    )
    trade_sol_usd_pool: str | None = Field(
        DEVNODE_SOL_USD_POOL,
        description="A PumpSwap pool of wrapped SOL against usdc_mint whose reserves give the live SOL/USD rate "
        "(/pricing: rate_source pool:<address>), read at most every trade_sol_usd_ttl_s. Default: the pool the "
        "embedded devnode hosts; on another chain, a real pool's address, or empty for the configured rate only.",
    )
    trade_sol_usd_ttl_s: float = Field(
        10.0, gt=0, le=3_600, description="How long a SOL/USD rate read from the pool is used before it is read again."
    )
    ip_limits: dict[str, IpLimit] = Field(
        default_factory=lambda: dict(DEFAULT_IP_LIMITS),
        description="Per-client-address limits of the account and session routes, by group (JSON in the "
        "environment); groups left out keep their defaults. Each of R replicas enforces rps / R and "
        "ceil(burst / R) (R: ingress_replicas, or ingress_autoscaling.max_replicas).",
    )
    trusted_proxies: list[str] = Field(
        default_factory=list,
        description="Addresses or networks of proxies whose X-Forwarded-For is believed: the client is the "
        "right-most address not in this list. Empty: the client is the peer address.",
    )
    block_engine_url: str | None = Field(
        None,
        description="Block engine JSON-RPC base (ends in /api/v1) for bundles and the relay send leg; "
        "empty: the devnode's local block engine in the embedded default, else no relay.",
    )
    tip_floor_url: str | None = Field(
        None,
        description="Where the tip floor is read (mainnet Jito serves it apart from the block engine); "
        "empty: {block_engine_url}/bundles/tip_floor.",
    )
    send_legs: list[SendLeg] = Field(
        default_factory=lambda: list(SEND_LEGS),
        min_length=1,
        description="The legs sendAndConfirm broadcasts on at once.",
    )
    account_shards: int = Field(
        2,
        ge=0,
        le=64,
        description="Account-shard actors started by gateway up, owning each account's rate and concurrency "
        "(0: each replica enforces its share of them).",
    )
    ingress_autoscaling: IngressAutoscaling | None = Field(
        None,
        description="Serve autoscales the ingress replicas between min_replicas and max_replicas, aiming at "
        "target_ongoing_requests in flight per replica (JSON in the environment); a replica removed first drains: "
        "its sockets close 1012, its usage is settled, its leases and slices given back. Needs account_shards "
        "(the limits must not depend on the replica count) and ingress_mode haproxy. The per-replica shares "
        "(ip_limits, credit lease sizes) divide by max_replicas. "
        "Empty: ingress_replicas, fixed.",
    )
    send_racers: int = Field(
        2, ge=0, le=64, description="Send-racer actors started by gateway up (0: races run in the replicas)."
    )
    redis_max_memory_mb: int = Field(
        256, ge=1, le=1_000_000, description="Embedded Redis memory bound; full means 503, never an evicted nonce."
    )
    response_cache: bool = Field(
        True, description="Cache node answers that can no longer change (finalized reads), per replica and in Redis."
    )
    response_cache_entries: int = Field(
        10_000, ge=1, le=10_000_000, description="Entries of each replica's response cache (also bounded to 64 MiB)."
    )
    response_cache_unfinalized_ttl_ms: int = Field(
        0,
        ge=0,
        le=60_000,
        description="How long a replica keeps an answer that may still change (processed, confirmed); 0: never.",
    )

    @field_validator("database_url")
    @classmethod
    def _check_database_url(cls, value: str | None) -> str | None:
        return _url_with_scheme(value, ("postgresql", "postgres"), "database_url")

    @field_validator("redis_url")
    @classmethod
    def _check_redis_url(cls, value: str | None) -> str | None:
        return _url_with_scheme(value, ("redis", "rediss", "unix"), "redis_url")

    @field_validator("upstream_rpc_url", "fallback_rpc_url", "upstream_grpc_url")
    @classmethod
    def _check_http_url(cls, value: str | None) -> str | None:
        return _url_with_scheme(value, ("http", "https"), "upstream URL")

    @field_validator("block_engine_url", "tip_floor_url")
    @classmethod
    def _check_engine_url(cls, value: str | None) -> str | None:
        return _url_with_scheme(value, ("http", "https"), "block engine URL")

    @field_validator("upstream_ws_url")
    @classmethod
    def _check_ws_url(cls, value: str | None) -> str | None:
        return _url_with_scheme(value, ("ws", "wss"), "upstream_ws_url")

    @field_validator("api_key_secret")
    @classmethod
    def _check_secret(cls, value: str | None) -> str | None:
        if value is None or value == "":
            return None
        try:
            if len(bytes.fromhex(value)) == 32:
                return value
        except ValueError:
            pass
        raise ValueError("api_key_secret must be 64 hex characters (32 bytes)")

    @field_validator("pricing")
    @classmethod
    def _check_pricing(cls, value: dict[str, int]) -> dict[str, int]:
        from gateway.core.methods import DEFAULT_CLASS_CREDITS

        known = {c.value for c in DEFAULT_CLASS_CREDITS}
        for name, credits in value.items():
            if name not in known:
                raise ValueError(f"pricing: unknown method class {name!r}; known: {', '.join(sorted(known))}")
            if credits <= 0:
                raise ValueError(f"pricing: {name} must be a positive integer (a free class would be an open door)")
        return value

    @field_validator("deposit_address", "fee_payer_address")
    @classmethod
    def _check_address(cls, value: str | None) -> str | None:
        if value is not None and value != "" and not is_pubkey(value):
            raise ValueError(f"{value!r} is not a base58 public key")
        return value or None

    @field_validator("signal_programs", "signal_wallets")
    @classmethod
    def _check_pubkeys(cls, value: list[str]) -> list[str]:
        bad = next((key for key in value if not is_pubkey(key)), None)
        if bad is not None:
            raise ValueError(f"{bad!r} is not a base58 public key")
        return list(dict.fromkeys(value))

    @field_validator("ip_limits")
    @classmethod
    def _check_ip_limits(cls, value: dict[str, IpLimit]) -> dict[str, IpLimit]:
        unknown = set(value) - set(DEFAULT_IP_LIMITS)
        if unknown:
            raise ValueError(f"ip_limits: unknown group {sorted(unknown)[0]!r}; known: {', '.join(DEFAULT_IP_LIMITS)}")
        return {**DEFAULT_IP_LIMITS, **value}

    @field_validator("ingress_autoscaling")
    @classmethod
    def _check_autoscaling(cls, value: IngressAutoscaling | None, info: ValidationInfo) -> IngressAutoscaling | None:
        if value is None:
            return None
        if info.data.get("account_shards") == 0:
            raise ValueError(
                "needs account_shards of at least 1 (GATEWAY_ACCOUNT_SHARDS): without shards each replica enforces "
                "ceil(limit / ingress_replicas) of the per-account limits, which a changing replica count breaks"
            )
        mode = info.data.get("ingress_mode")
        if mode is not None and mode != "haproxy":
            raise ValueError(
                f"needs ingress_mode haproxy (GATEWAY_INGRESS_MODE is {mode}): direct puts one replica on the port, "
                "and behind Serve's proxy a stopping replica's open WebSockets hold its drain until it is killed"
            )
        if info.data.get("ingress_replicas", 1) != 1:
            raise ValueError("ingress_replicas is the fixed count: leave it at 1 with ingress_autoscaling")
        return value

    @field_validator("trusted_proxies")
    @classmethod
    def _check_trusted_proxies(cls, value: list[str]) -> list[str]:
        for entry in value:
            try:
                ipaddress.ip_network(entry, strict=False)
            except ValueError as exc:
                raise ValueError(f"trusted_proxies: {entry!r} is not an IP address or network") from exc
        return value

    @model_validator(mode="after")
    def _check_socket_headroom(self) -> Self:
        if self.max_ongoing_requests < self.ws_max_connections + HTTP_HEADROOM:
            raise ValueError(
                f"max_ongoing_requests ({self.max_ongoing_requests}) must be at least ws_max_connections "
                f"({self.ws_max_connections}) + {HTTP_HEADROOM}: open sockets would take the slots HTTP calls need"
            )
        return self

    @model_validator(mode="after")
    def _check_grpc_tls(self) -> Self:
        if (self.grpc_tls_cert is None) != (self.grpc_tls_key is None):
            raise ValueError("grpc_tls_cert and grpc_tls_key go together: set both (TLS) or neither (plaintext)")
        return self

    @property
    def grpc_stream(self) -> bool:
        """Whether gateway up serves the gRPC stream: server actors wanted and an upstream geyser to re-serve."""
        return self.grpc_servers > 0 and self.upstream_grpc_url is not None

    @model_validator(mode="after")
    def _check_lease_timing(self) -> Self:
        # Usage is settled at the flush: a lease must outlive several flushes, or a retired lease could
        # expire before its usage settles, and that usage would be dropped.
        if self.credit_flush_interval_s * 4 > self.lease_ttl_s:
            raise ValueError(
                f"credit_flush_interval_s ({self.credit_flush_interval_s:g}) must be at most a quarter of "
                f"lease_ttl_s ({self.lease_ttl_s:g})"
            )
        return self

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        sources: list[PydanticBaseSettingsSource] = [init_settings, env_settings]
        if settings_cls.model_config.get("toml_file"):
            sources.append(TomlConfigSettingsSource(settings_cls))
        return tuple(sources)

    @property
    def share_replicas(self) -> int:
        """What the replica-local shares divide by (ip_limits, the WebSocket caps, lease sizes): the fixed
        count, or the most replicas autoscaling may run, so that together they never allow more than the
        whole, at the price of allowing less while fewer run."""
        autoscaling = self.ingress_autoscaling
        return self.ingress_replicas if autoscaling is None else autoscaling.max_replicas

    @property
    def api_key_secret_bytes(self) -> bytes | None:
        return bytes.fromhex(self.api_key_secret) if self.api_key_secret else None

    @property
    def resolved_home(self) -> Path:
        return self.home.expanduser().resolve()

    @property
    def shown_network(self) -> str:
        return self.network or MAINNET

    @property
    def crediting_delay_s(self) -> int:
        """About when a deposit is credited after it is sent: the devnode finalizes two slots after
        landing and the watcher polls every ``deposit_poll_s``; on mainnet docs/api.md's 30 s."""
        if self.shown_network != DEVNODE:
            return 30
        return math.ceil(2 * self.devnode_slot_ms / 1000 + self.deposit_poll_s) + 1

    def derived_ws_url(self) -> str | None:
        """The PubSub URL: configured, or the RPC URL with ws(s) scheme and port + 1 (Solana's convention)."""
        if self.upstream_ws_url or not self.upstream_rpc_url:
            return self.upstream_ws_url
        parsed = urlparse(self.upstream_rpc_url)
        scheme = "wss" if parsed.scheme == "https" else "ws"
        if parsed.port is None:
            return f"{scheme}://{parsed.netloc}{parsed.path}"
        return f"{scheme}://{parsed.hostname}:{parsed.port + 1}{parsed.path}"


def load_settings(config_file: Path | None = None, **overrides: Any) -> Settings:
    """Load and validate settings, turning pydantic's errors into one readable :class:`ConfigError`."""
    if config_file is None and os.environ.get("GATEWAY_CONFIG"):
        config_file = Path(os.environ["GATEWAY_CONFIG"])
    settings_cls: type[Settings] = Settings
    if config_file is not None:
        if not config_file.is_file():
            raise ConfigError(f"config file not found: {config_file}")
        config = SettingsConfigDict(**{**Settings.model_config, "toml_file": config_file})
        settings_cls = type("FileSettings", (Settings,), {"model_config": config})
    try:
        return settings_cls(**overrides)
    except ValidationError as exc:
        lines = []
        for err in exc.errors():
            name = ".".join(str(p) for p in err["loc"]) or "settings"
            lines.append(f"  GATEWAY_{name.upper()} ({name}): {err['msg']}")
        raise ConfigError("invalid configuration:\n" + "\n".join(lines)) from exc

"""The settings every part of the service shares, and what each feature's settings build on.

Each feature declares its own settings in ``gateway/<feature>/settings.py``, a subclass of
:class:`ServiceSettings`; ``gateway/app/settings.py`` composes them, with the deployment's own, into the one
``Settings`` that environment variables (``GATEWAY_*``) and an optional TOML file fill. What is here is
what several features read: where the service runs and what it talks to (PostgreSQL, Redis, the node,
the devnode), the serving edge (what transports, ``/ws`` and ``/mcp`` read through the app's settings),
and the payment terms (the USDC mint, the deposit and fee-payer addresses, the credit rate). A setting
left empty means "use the embedded part": embedded PostgreSQL, embedded Redis, the local devnode, a
local Ray.
"""

from __future__ import annotations

import ipaddress
import math
import re
import ssl
from pathlib import Path
from typing import Annotated, Self
from urllib.parse import urlparse, urlsplit

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from gateway.core.errors import ConfigError as ConfigError  # defined in the kernel so gateway.base.keys raises it too
from gateway.core.params import is_pubkey
from gateway.core.upstreams import RPC_ROLES, Role, Tier, UpstreamNode, check_pool, serving

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
#: An origin as a browser sends it in ``Origin``: scheme://host[:port], no path.
ORIGIN = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://[^/?#\s]+")


def url_with_scheme(value: str | None, schemes: tuple[str, ...], name: str) -> str | None:
    """``value`` if it is a URL of one of ``schemes``; empty is None (the embedded part or none)."""
    if value is None or value == "":
        return None
    parsed = urlparse(value)
    if parsed.scheme not in schemes or not (parsed.netloc or parsed.path):
        raise ValueError(f"{name} must be a URL starting with {' or '.join(s + '://' for s in schemes)}")
    return value


def _is_http_origin(text: str) -> bool:
    """Whether ``text`` is ``http(s)://host[:port]`` and nothing else."""
    parts = urlsplit(text)
    try:
        parts.port  # noqa: B018 (raises ValueError for a port that is not a number or out of range)
    except ValueError:
        return False
    extra = parts.path or parts.query or parts.fragment or parts.username or parts.password
    return parts.scheme in ("http", "https") and bool(parts.hostname) and not extra


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


class ServiceSettings(BaseModel):
    """What several features read. Field descriptions are the reference documentation.

    A feature's settings model extends this one; extra fields are ignored so that an actor validates
    its own model from the whole settings it is sent (``Settings.model_dump``), and the root
    ``gateway.app.settings.Settings`` forbids them.
    """

    # hide_input_in_errors: a bad setting's message never repeats its value (a node URL's key, a DSN's password)
    model_config = ConfigDict(extra="ignore", validate_default=True, hide_input_in_errors=True)

    # Where the service runs and what it talks to.
    home: Path = Field(Path(".gateway"), description="Data dir: embedded databases, keys, devnode state.")
    host: str = Field("127.0.0.1", description="HTTP listen address of the Serve app.")
    port: Port = Field(8000, description="HTTP port (JSON-RPC, /ws, /mcp, REST).")
    grpc_servers: int = Field(
        1,
        ge=0,
        le=16,
        description="gRPC stream server actors gateway up starts, all on grpc_port (the kernel spreads connections "
        "over them); each holds one upstream subscription. 0: no gRPC stream.",
    )
    upstream_grpc_url: str | None = Field(
        None,
        description="The node's Yellowstone geyser endpoint (http:// or https://host:port) that the gRPC stream "
        "re-serves; empty: the devnode's in the embedded default, else no gRPC stream.",
    )
    database_url: str | None = Field(None, description="PostgreSQL DSN; empty starts embedded PostgreSQL.")
    redis_url: str | None = Field(None, description="Redis URL (redis://, rediss://, unix://); empty: embedded.")
    upstreams: list[UpstreamNode] = Field(
        default_factory=list,
        description="The pool of nodes (JSON in the environment): a list of {name, rpc_url, ws_url?, grpc_url?, "
        "grpc_token?, headers?, tier?: primary|fallback, roles?: [reads, heavy, sends, pubsub, geyser]}, each URL, "
        "the token and each header's value a value or a reference, {env: NAME} or {file: PATH}, read by each "
        "process and never written out (docs/configuration.md, A pool of nodes). Set, gateway up starts no devnode "
        "and the single-node settings (upstream_rpc_url, upstream_ws_url, upstream_grpc_url, fallback_rpc_url) "
        "must be empty; empty, those make a pool of one or two.",
    )
    upstream_rpc_url: str | None = Field(None, description="Solana node JSON-RPC URL; empty starts the devnode.")
    upstream_ws_url: str | None = Field(None, description="Solana node PubSub URL; derived from the RPC URL if empty.")
    upstream_max_answer_bytes: int = Field(
        64 << 20,
        ge=1 << 10,
        le=1 << 30,
        description="The most of one node answer a replica reads (decompressed); past it the call is answered "
        "-32012 and charged (docs/api.md, Limits).",
    )
    upstream_buffered_answer_bytes: int = Field(
        256 << 20,
        ge=1 << 20,
        le=1 << 34,
        description="The most bytes of node answers a replica's node client holds at once, every answer being read "
        "counted; an answer that would go past it is dropped and its call answered as a lost node answer (HTTP 502, "
        "docs/api.md, Billing and refunds).",
    )
    fallback_rpc_url: str | None = Field(
        None, description="Second node, of the fallback tier: used while the first is out of service."
    )
    upstream_ca_file: str | None = Field(
        None,
        description="A PEM file of CAs the node's clients trust beside the system's: a node whose certificate a "
        "private CA signed (RPC and fallback over https://, PubSub over wss://, the gRPC stream over https://). "
        "Only the node's clients use it; webhook posts and other clients keep the system's CAs.",
    )
    health_poll_s: float = Field(
        0.3, ge=0.05, le=60, description="How often the pool's owner probes each node (its health, slots, genesis)."
    )
    upstream_probe_timeout_s: float = Field(
        1.0, ge=0.05, le=30, description="A probe not answered within this counts as a failed one."
    )
    upstream_max_lag_slots: int = Field(
        25, ge=1, le=10_000, description="A node more slots than this behind the pool's best leaves service."
    )
    upstream_out_at_least_s: float = Field(
        10.0,
        ge=0,
        le=3_600,
        description="A node that left service comes back no sooner than this, and after three good probes in a row "
        "(at once when no other node serves a role it serves).",
    )
    upstream_stream_silence_s: float = Field(
        3.0,
        ge=0.5,
        le=60,
        description="An upstream stream (PubSub, geyser) whose node sent nothing for this long (PubSub: no pong to a "
        "ping sent every second) is left as hung and opened on another node of its role.",
    )
    upstream_hedge_min_ms: float = Field(
        10.0,
        ge=0,
        le=60_000,
        description="A caller's read unanswered after its method's recent p90, and at least this, is also asked of "
        "a second node.",
    )
    upstream_extra_calls_per_s: float = Field(
        20.0,
        ge=0,
        le=100_000,
        description="Retries and hedges each process may send to one node a second, one token per call an extra "
        "request holds (five seconds' worth at once; while several callers want some, each at most an even share); "
        "a retry of a call that never reached its node is free.",
    )
    gc_young_threshold: int = Field(
        50_000,
        ge=0,
        le=10_000_000,
        description="Allocations between young-generation GC passes in a serving process: an ingress replica, a gRPC "
        "stream server, a webhook dispatcher (0: Python's 700).",
    )
    redis_max_memory_mb: int = Field(
        256, ge=1, le=1_000_000, description="Embedded Redis memory bound; full means 503, never an evicted nonce."
    )
    # The serving edge: replicas, open sockets, request bodies, client addresses, browser origins.
    ingress_replicas: int = Field(
        1, ge=1, le=64, description="HTTP ingress replicas (a fixed count; leave it at 1 with ingress_autoscaling)."
    )
    ingress_autoscaling: IngressAutoscaling | None = Field(
        None,
        description="Serve autoscales the ingress replicas between min_replicas and max_replicas, aiming at "
        "target_ongoing_requests in flight per replica (JSON in the environment); a replica removed first drains: "
        "its sockets close 1012, its usage is settled, its leases and slices given back. Needs account_shards "
        "(the limits must not depend on the replica count) and ingress_mode haproxy or reuseport. The "
        "per-replica shares (ip_limits, credit lease sizes) divide by max_replicas. "
        "Empty: ingress_replicas, fixed.",
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
    trusted_proxies: list[str] = Field(
        default_factory=list,
        description="Addresses or networks of proxies whose X-Forwarded-For is believed (on gRPC, their "
        "x-forwarded-for metadata): the client is the right-most address not in this list. Empty: the client is "
        "the peer address.",
    )
    cors_allowed_origins: list[str] = Field(
        default_factory=lambda: ["*"],
        description="Origins (scheme://host[:port]) whose web pages may call every route but /mcp and read the "
        "answers, refusals included (CORS: docs/api.md, Use from a browser). '*', the default, allows every "
        "origin, as hosted RPCs do; empty: no page on another origin. Nothing is refused for it: a browser "
        "refuses an answer without the CORS headers; an account's own rules refuse the key (docs/api.md).",
    )
    public_origins: list[str] = Field(
        default_factory=list,
        description="More origins (http(s)://host[:port]) the gateway's own pages are served at, beside public_url's "
        "(a second domain): with public_url they are the gateway's own origins, which an account's origin rule "
        "never refuses (docs/api.md, Access rules); a request's Host header never is. Without public_url: "
        "http://127.0.0.1, localhost and [::1] at port (the embedded stack's /app/), and these.",
    )
    mcp_allowed_origins: list[str] = Field(
        default_factory=list,
        description="Origins (scheme://host[:port]) whose browser pages may call /mcp besides the gateway's own "
        "(127.0.0.1, localhost or [::1] at its port); a request with any other Origin header is refused 403 (the "
        "MCP transport's DNS-rebinding rule). Agents send no Origin and are never refused for it. '*' allows "
        "every origin.",
    )
    # The embedded local chain.
    devnode_rpc_port: Port = Field(8899, description="Devnode JSON-RPC port.")
    devnode_ws_port: Port = Field(8900, description="Devnode PubSub port.")
    devnode_grpc_port: Port = Field(10001, description="Devnode geyser gRPC port.")
    devnode_slot_ms: int = Field(400, ge=10, le=10_000, description="Devnode slot time.")
    devnode_retention_slots: int = Field(54_000, ge=10, description="Devnode block retention (~6 h at 400 ms).")
    devnode_feed: bool = Field(True, description="Generate launch-platform (pump.fun-shaped) traffic on the devnode.")
    devnode_nodes: int = Field(
        1,
        ge=1,
        le=8,
        description="Nodes of the embedded chain in the pool (`gateway up --nodes N`): 1, the devnode itself; more, "
        "that many devnode followers of it, each a process of its own on free ports under <home>/followers (the "
        "devnode leads them, outside the pool).",
    )
    # The payment terms: what a deposit is, where it goes, what it buys.
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
    x402_settle: bool = Field(
        True,
        description="Serve POST /x402/settle (x402 payments, self-paid or with the fee paid by keys/fee-payer.json); "
        "off: it answers 503 SETTLEMENT_NOT_CONFIGURED.",
    )
    deposit_poll_s: float = Field(2.0, gt=0, le=60, description="How often the deposit watcher polls the node.")

    @field_validator("database_url")
    @classmethod
    def _check_database_url(cls, value: str | None) -> str | None:
        return url_with_scheme(value, ("postgresql", "postgres"), "database_url")

    @field_validator("redis_url")
    @classmethod
    def _check_redis_url(cls, value: str | None) -> str | None:
        return url_with_scheme(value, ("redis", "rediss", "unix"), "redis_url")

    @model_validator(mode="after")
    def _check_pool(self) -> Self:
        if not self.upstreams:
            return self
        legacy = [
            f
            for f in ("upstream_rpc_url", "upstream_ws_url", "upstream_grpc_url", "fallback_rpc_url")
            if getattr(self, f)
        ]
        if legacy:
            raise ValueError(f"upstreams is set: leave {', '.join(legacy)} empty (each node is an entry of upstreams)")
        problems = check_pool(self.upstreams)
        if problems:
            raise ValueError("upstreams: " + "; ".join(problems))
        return self

    @property
    def embedded_chain(self) -> bool:
        """Whether no node is configured, so that ``gateway up`` starts the chain (the devnode) itself."""
        return not self.upstreams and self.upstream_rpc_url is None

    def pool_nodes(self) -> list[UpstreamNode]:
        """The pool: ``upstreams``, or the single-node settings as a pool of one (``primary``) or two (with
        ``fallback``, of the fallback tier, serving the calls but no PubSub or geyser)."""
        if self.upstreams:
            return list(self.upstreams)
        primary = UpstreamNode(
            name="primary",
            rpc_url=self.upstream_rpc_url or DEFAULT_UPSTREAM,
            ws_url=self.derived_ws_url() or DEFAULT_UPSTREAM_WS,
            grpc_url=self.upstream_grpc_url,
        )
        if not self.fallback_rpc_url:
            return [primary]
        fallback = UpstreamNode(name="fallback", rpc_url=self.fallback_rpc_url, tier=Tier.FALLBACK, roles=RPC_ROLES)
        return [primary, fallback]

    def pubsub_node(self) -> UpstreamNode | None:
        """The first node serving ``pubsub`` (each replica's one upstream PubSub connection), if any."""
        return next(iter(serving(self.pool_nodes(), Role.PUBSUB)), None)

    def geyser_node(self) -> UpstreamNode | None:
        """The first node serving ``geyser`` (each gRPC server's one upstream subscription), if any."""
        return next(iter(serving(self.pool_nodes(), Role.GEYSER)), None)

    @field_validator("upstream_rpc_url", "fallback_rpc_url", "upstream_grpc_url")
    @classmethod
    def _check_http_url(cls, value: str | None) -> str | None:
        return url_with_scheme(value, ("http", "https"), "upstream URL")

    @field_validator("upstream_ca_file")
    @classmethod
    def _check_ca_file(cls, value: str | None) -> str | None:
        if not value:
            return None
        try:  # the node client loads it the same way (gateway/node/wire.py, tls_context)
            ssl.create_default_context().load_verify_locations(cafile=value)
        except (OSError, ssl.SSLError) as exc:
            raise ValueError(f"{value!r} cannot be read as a PEM file of CA certificates ({exc})") from exc
        return value

    @field_validator("upstream_ws_url")
    @classmethod
    def _check_ws_url(cls, value: str | None) -> str | None:
        return url_with_scheme(value, ("ws", "wss"), "upstream_ws_url")

    @field_validator("deposit_address", "fee_payer_address")
    @classmethod
    def _check_address(cls, value: str | None) -> str | None:
        if value is not None and value != "" and not is_pubkey(value):
            raise ValueError(f"{value!r} is not a base58 public key")
        return value or None

    @field_validator("cors_allowed_origins")
    @classmethod
    def _check_origins(cls, value: list[str]) -> list[str]:
        for entry in value:
            if entry != "*" and not ORIGIN.fullmatch(entry.rstrip("/")):
                raise ValueError(f"{entry!r} is not '*' nor an origin (scheme://host[:port], no path)")
        return value

    @field_validator("public_origins")
    @classmethod
    def _check_public_origins(cls, value: list[str]) -> list[str]:
        origins = [entry.strip().rstrip("/").lower() for entry in value]
        for position, origin in enumerate(origins, 1):
            if not _is_http_origin(origin):  # named by its position: no setting's value in an error
                raise ValueError(f"public_origins: entry {position} is not an origin http(s)://host[:port], no path")
        return origins

    @field_validator("trusted_proxies")
    @classmethod
    def _check_trusted_proxies(cls, value: list[str]) -> list[str]:
        for entry in value:
            try:
                ipaddress.ip_network(entry, strict=False)
            except ValueError as exc:
                raise ValueError(f"trusted_proxies: {entry!r} is not an IP address or network") from exc
        return value

    @property
    def grpc_stream(self) -> bool:
        """Whether gateway up serves the gRPC stream: server actors wanted and an upstream geyser to re-serve."""
        return self.grpc_servers > 0 and self.geyser_node() is not None

    @property
    def share_replicas(self) -> int:
        """What the replica-local shares divide by (ip_limits, the WebSocket caps, lease sizes): the fixed
        count, or the most replicas autoscaling may run, so that together they never allow more than the
        whole, at the price of allowing less while fewer run."""
        autoscaling = self.ingress_autoscaling
        return self.ingress_replicas if autoscaling is None else autoscaling.max_replicas

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

"""The devnode: a local Solana JSON-RPC + PubSub node backed by LiteSVM.

Real: transaction execution (System, SPL Token, Token-2022, Associated Token Account and the other
programs LiteSVM loads), Ed25519 signature checks, fees, rent, the Clock sysvar following the slot
clock, blockhashes that expire after 150 blocks, failed transactions landing with their fee.

Simplified: one validator and no votes, every slot produces a block; commitment is reached by age
(processed in the landing slot, confirmed one slot later, finalized two slots later) and commitment
parameters are otherwise ignored; account / program / logs notifications are sent on landing.
Blocks and transaction history are kept in memory for `retention_slots` and lost on restart; the
accounts touched by transactions are persisted to <data_dir>/accounts.json on stop, and the launch feed
counts its starts in <data_dir>/feed.json (a restarted feed launches new coins, never the same ones again).
A SOL/USDC pool (devnode/sol_usd_pool.py) is written at the first start, for the gateway's SOL/USD rate.

The sending side, as a leader and a block engine offer it: the TPU QUIC listener (devnode/tpu.py,
its address in getClusterNodes' `tpuQuic`) and the local block engine (devnode/block_engine/,
Jito's API under `{rpc_url}/api/v1`). Each can be turned off in `DevnodeConfig`. The streaming side: the
geyser gRPC server (devnode/geyser.py, Yellowstone's `geyser.Geyser` service, at `grpc_url`).

Several nodes of one chain (devnode/replication/): a devnode keeps a replication log of its last
`replication_slots` slots and serves it at `{rpc_url}/replication`; a devnode started with `follow` (a
leader's RPC URL) is an RPC node of that leader. Real: the follower holds its own copy of the chain (accounts,
blocks with the leader's blockhashes, history and indexes, the Clock sysvar), applied from what the leader
recorded, so a follower `lag_slots` behind really serves older state; its PubSub and geyser notify from its
own chain; it forwards sendTransaction and requestAirdrop to the leader; getHealth, GET /health and
getMaxShredInsertSlot say how far behind it is, as Agave's do; a dropped stream is resumed (or the state
re-synced) without dropping its own clients. Simplified: nothing is replayed or verified (the leader's
records are taken as they are), there is no gossip, turbine or repair (one stream from one leader), a
follower's history starts at the leader's log window, and it keeps nothing across restarts (it re-syncs).
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import importlib
import logging
import time
from typing import Any

from aiohttp import web
from solders.keypair import Keypair
from solders.pubkey import Pubkey

from devnode.block_engine import BASE_PATH, BlockEngine, BlockEngineRoutes
from devnode.chain import Chain
from devnode.chain.constants import IDENTITY
from devnode.config import DevnodeConfig
from devnode.geyser import GeyserServer
from devnode.persist import (
    FEED_RUN_FILE,
    USDC_AUTHORITY_FILE,
    load_or_create_keypair,
    load_state,
    save_state,
    write_ready_file,
)
from devnode.pubsub import PubSub
from devnode.replication import Follower, ReplicationLog, ReplicationRoute
from devnode.replication.rpc import FollowerDispatcher, FollowerRpc
from devnode.rpc import NodeInfo, RpcDispatcher
from devnode.server import HttpServer
from devnode.sol_usd_pool import install_sol_usd_pool
from devnode.tpu import TpuListener

log = logging.getLogger(__name__)


class Devnode:
    """Owns the chain, the slot clock, the RPC and PubSub servers, the TPU listener, the block engine,
    the replication log and (optionally) the launch feed; or, following a leader, the chain it follows
    into and the RPC, PubSub and geyser servers over it."""

    def __init__(self, config: DevnodeConfig) -> None:
        self.config = config
        config.data_dir.mkdir(parents=True, exist_ok=True)
        self.follower: Follower | None = None
        self.replication: ReplicationLog | None = None
        self._usdc_mint_authority: Keypair | None = None
        self.tpu: TpuListener | None = None
        self.block_engine: BlockEngine | None = None
        if config.follow is not None:
            # A placeholder until start() loads the leader's state into it (in place: the servers keep it).
            self.chain = Chain(retention_slots=config.retention_slots, usdc_mint_authority=Pubkey.default())
            self.follower = Follower(self.chain, config.follow, lag_slots=config.lag_slots)
        else:
            self._usdc_mint_authority = load_or_create_keypair(config.data_dir / USDC_AUTHORITY_FILE)
            state, accounts = load_state(config.data_dir)
            self.chain = Chain(
                retention_slots=config.retention_slots,
                usdc_mint_authority=self._usdc_mint_authority.pubkey(),
                saved_state=state,
                saved_accounts=accounts,
            )
            install_sol_usd_pool(self.chain)
            self.tpu = TpuListener(self.chain, IDENTITY) if config.tpu else None
            self.block_engine = BlockEngine(self.chain) if config.block_engine else None
            if config.replication_slots > 0:  # after every genesis write: they are in its first base
                self.replication = ReplicationLog(self.chain, window=config.replication_slots)
        self._pubsub = PubSub(self.chain)
        self.geyser = GeyserServer(self.chain) if config.geyser else None
        self._http: HttpServer | None = None
        self._replication_route: ReplicationRoute | None = None
        self._clock: asyncio.Task[None] | None = None
        self._feed: Any = None
        self._rpc_port = 0
        self._ws_port = 0

    @property
    def usdc_mint_authority(self) -> Keypair:
        """The key that mints the chain's USDC (a leader's, kept in its data dir)."""
        if self._usdc_mint_authority is None:
            raise AttributeError("a follower has no USDC mint authority: it is its leader's")
        return self._usdc_mint_authority

    @property
    def rpc_url(self) -> str:
        return f"http://{self._url_host}:{self._rpc_port}"

    @property
    def ws_url(self) -> str:
        return f"ws://{self._url_host}:{self._ws_port}"

    @property
    def pubsub_subscriptions(self) -> int:
        """Open PubSub subscriptions, all clients together (what a gateway's fan-out saves shows here)."""
        return self._pubsub.subscription_count

    async def restart_pubsub(self) -> None:
        """Drop every PubSub connection and listen again on the same port (a node's PubSub restarting)."""
        await self._pubsub.stop()
        await self._pubsub.start(self.config.host, self._ws_port)

    async def drop_followers(self) -> None:
        """Close every follower's replication stream (a network cut): they reconnect and resume."""
        if self._replication_route is not None:
            await self._replication_route.close_all()

    @property
    def tpu_quic_address(self) -> str | None:
        """`host:port` of the TPU QUIC listener (as getClusterNodes' `tpuQuic`), None when off."""
        return None if self.tpu is None or not self.tpu.port else f"{self._url_host}:{self.tpu.port}"

    @property
    def grpc_address(self) -> str | None:
        """`host:port` of the geyser gRPC server (what a gRPC client dials), None when off."""
        return None if self.geyser is None or not self.geyser.port else f"{self._url_host}:{self.geyser.port}"

    @property
    def grpc_url(self) -> str | None:
        """The geyser gRPC server as a URL (`http://host:port`, plaintext), None when off."""
        address = self.grpc_address
        return None if address is None else f"http://{address}"

    @property
    def block_engine_url(self) -> str | None:
        """The block engine's base URL (`{rpc_url}/api/v1`, as a Jito client takes it), None when off."""
        return None if self.block_engine is None else f"{self.rpc_url}{BASE_PATH}"

    @property
    def _url_host(self) -> str:
        host = self.config.host
        return f"[{host}]" if ":" in host else host

    async def start(self) -> None:
        """Bind PubSub, the TPU and RPC, start the slot clock (and the feed); returns once listening.
        A follower first syncs from its leader (`FollowError` if it cannot) and has no clock of its own."""
        host = self.config.host
        if self.config.ready_file is not None:
            self.config.ready_file.unlink(missing_ok=True)
        if self.follower is not None:
            await self.follower.start(self.config.follow_timeout_s)
        try:
            self._ws_port = await self._pubsub.start(host, self.config.ws_port)
            tpu_port = None if self.tpu is None else await self.tpu.start(host, self.config.tpu_port)
            if self.geyser is not None:
                await self.geyser.start(host, self.config.grpc_port)
            info = NodeInfo(host, 0, self._ws_port, self.config.slot_ms, tpu_port)
            self._http, dispatcher = self._http_server(info)
            self._rpc_port = await self._http.start(host, self.config.rpc_port)
        except BaseException:
            await self._stop_servers()
            if self.follower is not None:
                await self.follower.stop()
            raise
        dispatcher.info = dataclasses.replace(info, rpc_port=self._rpc_port)
        if self.follower is None:
            if self.block_engine is not None:
                self.chain.add_listener(self.block_engine)
            self._clock = asyncio.create_task(self._run_clock(), name="devnode-slot-clock")
            if self.config.feed:
                await self._start_feed()
        if self.config.ready_file is not None:
            write_ready_file(self.config.ready_file, self.urls())
        if self.follower is not None:
            log.info(
                "devnode following %s (lag %d slots): RPC %s, PubSub %s, geyser gRPC %s",
                self.follower.leader_url,
                self.follower.lag_slots,
                self.rpc_url,
                self.ws_url,
                self.grpc_url or "off",
            )
            return
        log.info(
            "devnode listening: RPC %s, PubSub %s, TPU QUIC %s, block engine %s, geyser gRPC %s",
            self.rpc_url,
            self.ws_url,
            self.tpu_quic_address or "off",
            self.block_engine_url or "off",
            self.grpc_url or "off",
        )

    def _http_server(self, info: NodeInfo) -> tuple[HttpServer, RpcDispatcher]:
        if self.follower is not None:
            dispatcher = FollowerDispatcher(self.chain, info, self.follower)
            front = FollowerRpc(dispatcher)
            return HttpServer(dispatcher, rpc=front.respond, health=front.health_text), dispatcher
        plain = RpcDispatcher(self.chain, info)
        routes: list[web.RouteDef] = []
        if self.block_engine is not None:
            routes += BlockEngineRoutes(self.block_engine).routes()
        hooks = []
        if self.replication is not None:
            self._replication_route = ReplicationRoute(self.replication)
            routes += self._replication_route.routes()
            hooks.append(self._replication_route.close_all)
        return HttpServer(plain, routes, on_shutdown=hooks), plain

    def urls(self) -> dict[str, Any]:
        """Where the node listens (what the ready file holds): None for what it does not serve."""
        return {
            "rpc_url": self.rpc_url,
            "ws_url": self.ws_url,
            "grpc_url": self.grpc_url,
            "tpu_quic": self.tpu_quic_address,
            "block_engine_url": self.block_engine_url,
            "follow": self.config.follow,
            "lag_slots": self.config.lag_slots if self.follower is not None else None,
        }

    async def _start_feed(self) -> None:
        try:
            module = importlib.import_module("devnode.feed")
            self._feed = module.LaunchFeed(
                chain=self.chain,
                seed=self.config.feed_seed,
                interval_ms=self.config.feed_interval_ms,
                run_file=self.config.data_dir / FEED_RUN_FILE,
            )
            await self._feed.start()
        except Exception:
            log.warning("devnode: launch feed unavailable, continuing without it", exc_info=True)
            self._feed = None

    async def _run_clock(self) -> None:
        loop = asyncio.get_running_loop()
        period = self.config.slot_ms / 1000
        deadline = loop.time() + period
        while True:
            await asyncio.sleep(max(0.0, deadline - loop.time()))
            try:
                self.chain.tick(time.time())
            except Exception:
                log.exception("devnode: slot tick failed")
            deadline += period
            if loop.time() - deadline > 10 * period:  # after a stall, do not burst through missed slots
                deadline = loop.time() + period

    async def stop(self) -> None:
        """Stop the feed, the clock and the servers, then persist account state (a follower: stop following,
        persist nothing)."""
        if self.config.ready_file is not None:
            self.config.ready_file.unlink(missing_ok=True)
        if self.follower is not None:
            await self._stop_servers()
            await self.follower.stop()
            return
        if self._feed is not None:
            try:
                await self._feed.stop()
            except Exception:
                log.warning("devnode: launch feed failed to stop cleanly", exc_info=True)
            self._feed = None
        if self._clock is not None:
            self._clock.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._clock
            self._clock = None
        if self.block_engine is not None:
            self.chain.remove_listener(self.block_engine)
        await self._stop_servers()
        state, accounts = self.chain.export_state()
        save_state(self.config.data_dir, state, accounts)

    async def _stop_servers(self) -> None:
        if self._http is not None:
            await self._http.stop()
            self._http = None
        if self.tpu is not None:
            await self.tpu.stop()
        if self.geyser is not None:
            await self.geyser.stop()
        await self._pubsub.stop()


async def serve(config: DevnodeConfig) -> None:
    """Start a devnode, run until cancelled, stop it."""
    node = Devnode(config)
    await node.start()
    try:
        await asyncio.Event().wait()
    finally:
        await asyncio.shield(node.stop())

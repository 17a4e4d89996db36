"""``gateway up`` as code: start each part in order, stop them in reverse, whatever failed.

Order: PostgreSQL (and migrations) → Redis → local chain → Ray → Serve. A configured URL replaces the
embedded part. Tests start the same :class:`Stack`, so they run what operators run.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from typing import Any

from actors.service import service_actor_names, start_groups
from actors.supervision import stop_actors
from gateway.app.settings import Settings
from gateway.auth.key_secret import SECRET_FILE, load_or_create_secret
from gateway.auth.store.service_keys import record_cluster_keys_at
from gateway.base.config import DEVNODE
from gateway.base.keys import DEPOSIT_WALLET, FEE_PAYER, ensure_service_keys
from gateway.core.upstreams import UpstreamNode
from gateway.node.health import HealthSettings, cluster_of
from gateway.runtime.cluster import STOP_BUDGET_S
from gateway.runtime.devnode_proc import FOLLOWERS, DevnodeProcess, record_followers, stop_stale
from gateway.runtime.embedded import EmbeddedPostgres, EmbeddedRedis
from gateway.runtime.exposure import network_refusals
from gateway.runtime.inspect import forget_ray_address, record_ray_address
from gateway.runtime.private_files import secure_home
from gateway.runtime.serve_runtime import ServeRuntime, stop_left_haproxy
from gateway.storage.migrate import migrate_url
from gateway.webhooks.targets import allow_private
from gateway.x402.devnode_settlement import prepare_sponsored_settlement

log = logging.getLogger(__name__)

Report = Callable[[str, str], None]


def _quiet(part: str, detail: str) -> None:
    log.info("%s: %s", part, detail)


class Stack:
    def __init__(self, settings: Settings, report: Report = _quiet) -> None:
        self.settings = settings
        self.report = report
        self.home = settings.resolved_home
        self._stops: list[tuple[str, Callable[[], None]]] = []
        self.resolved: Settings | None = None

    def start(self) -> Settings:
        """Start everything; on any failure stop what was started, then re-raise."""
        try:
            self.resolved = self._start()
        except BaseException:
            self.stop()
            raise
        return self.resolved

    def _start(self) -> Settings:
        s = self.settings
        refusals = network_refusals(s)  # a routable host: encrypted and authenticated, or refused
        if refusals:
            raise RuntimeError("refused: " + "; ".join(refusals))
        # what a `gateway up` killed with SIGKILL left running (gateway/runtime/leftovers.py)
        if s.embedded_chain:
            for data_dir in [self.home / "devnode", *sorted((self.home / FOLLOWERS).glob("node-*"))]:
                if stop_stale(data_dir):
                    self.report("devnode", f"stopped the one a killed `gateway up` left running in {data_dir.name}")
        if stop_left_haproxy(self.home):
            self.report("HAProxy", "stopped the one a killed `gateway up` left on the port")
        busy = [f"{host}:{port}" for host, port in self._ports() if not _port_free(host, port)]
        if busy:
            raise RuntimeError(f"already in use: {', '.join(busy)} (another gateway or devnode running?)")
        if not s.embedded_chain:  # every node's genesis hash, before anything starts: another cluster's is refused
            foreign = asyncio.run(cluster_of(s.pool_nodes(), HealthSettings.from_settings(s)))
            if foreign:
                raise RuntimeError("refused: " + "; ".join(foreign.values()))
        self.home.mkdir(parents=True, exist_ok=True)
        keys = ensure_service_keys(self.home)
        deposit = s.deposit_address or keys[DEPOSIT_WALLET]
        self.report("keys", f"deposit wallet {deposit} (keys in {self.home / 'keys'})")
        # every process this starts, on any machine, uses these and never creates a key (gateway/base/keys.py)
        updates: dict[str, Any] = {
            "home": self.home,
            "deposit_address": deposit,
            "fee_payer_address": s.fee_payer_address or keys[FEE_PAYER],
            "api_key_secret": s.api_key_secret or load_or_create_secret(self.home / SECRET_FILE).hex(),
            "webhook_allow_private": allow_private(s),  # on by default with the embedded devnode only
        }
        for fixed in secure_home(self.home):  # secrets are private files (gateway/runtime/private_files.py)
            self.report("permissions", fixed)

        database_url = s.database_url
        if database_url is None:
            pg = EmbeddedPostgres(self.home)
            database_url = pg.start()
            self._stops.append(("PostgreSQL", pg.stop))
        applied = asyncio.run(migrate_url(database_url))
        self.report("PostgreSQL", f"{_redact(database_url)} (migrations applied now: {applied or 'none'})")
        updates["database_url"] = database_url

        redis_url = s.redis_url
        if redis_url is None:
            redis = EmbeddedRedis(self.home, s.redis_max_memory_mb)
            redis_url = redis.start()
            self._stops.append(("Redis", redis.stop))
        self.report("Redis", _redact(redis_url))
        updates["redis_url"] = redis_url
        # the addresses every process compares its own with at start (/health's keys.mismatch)
        addresses = {name: updates[name] for name in ("deposit_address", "fee_payer_address")}
        asyncio.run(record_cluster_keys_at(redis_url, addresses))

        if s.embedded_chain:
            updates.update(self._start_chain())
        else:
            nodes = s.pool_nodes()
            if not s.upstreams:
                updates["upstream_ws_url"] = s.derived_ws_url()
            self.report("chain", f"{len(nodes)} node(s): " + ", ".join(f"{n.name} ({n.tier.value})" for n in nodes))

        resolved = s.model_copy(update=updates)
        serve_rt = ServeRuntime(resolved)

        def stop_ray() -> None:
            forget_ray_address(self.home)
            serve_rt.stop()

        self._stops.append(("Ray", stop_ray))
        serve_rt.start_ray()
        record_ray_address(self.home)  # how `gateway status` finds this cluster
        self.report("Ray", serve_rt.ray_description)
        actors = service_actor_names(resolved.model_dump(mode="json"))
        self._stops.append(("actors", lambda: stop_actors(actors)))  # all of them under one time bound
        self._start_actors(resolved, before_serve=True)  # the replicas call them from their first request
        self._stops.append(("Serve", serve_rt.stop_serve))  # first: the replicas settle with the actors up
        serve_rt.deploy()
        _wait_healthy(f"http://{resolved.host}:{resolved.port}/health")
        self._start_actors(resolved, before_serve=False)
        self.report("Serve", f"http://{resolved.host}:{resolved.port} ({replicas_report(resolved)})")
        return resolved

    def _start_chain(self) -> dict[str, Any]:
        """The embedded chain: the devnode, and with ``devnode_nodes`` > 1 that many followers of it as the
        pool (each a process of its own on free ports); the settings that point at them."""
        s = self.settings
        node = DevnodeProcess(
            self.home / "devnode",
            s.devnode_rpc_port,
            s.devnode_ws_port,
            s.devnode_slot_ms,
            s.devnode_retention_slots,
            s.devnode_feed,
            grpc_port=s.devnode_grpc_port,
        )
        node.start()
        self._stops.append(("devnode", node.stop))
        updates: dict[str, Any] = {
            "network": s.network or DEVNODE,
            "block_engine_url": s.block_engine_url or f"{node.rpc_url}/api/v1",
        }
        feed = "with generated launch traffic" if s.devnode_feed else "no feed"
        self.report("chain", f"devnode RPC {node.rpc_url}, PubSub {node.ws_url}, geyser {node.grpc_url} ({feed})")
        if s.x402_settle:  # the fee payer's SOL and the deposit account sponsored payments need
            self.report("x402", prepare_sponsored_settlement(node.rpc_url, self.home, s.usdc_mint))
        if s.devnode_nodes == 1:
            updates["upstream_rpc_url"], updates["upstream_ws_url"] = node.rpc_url, node.ws_url
            updates["upstream_grpc_url"] = s.upstream_grpc_url or node.grpc_url
            return updates
        pool = []
        for i in range(1, s.devnode_nodes + 1):
            name = f"node-{i}"
            follower = DevnodeProcess(
                self.home / FOLLOWERS / name, 0, 0, s.devnode_slot_ms, s.devnode_retention_slots, False,
                grpc_port=0, follow=node.rpc_url,
            )  # fmt: skip
            follower.start()
            self._stops.append((f"devnode {name}", follower.stop))
            pool.append(
                UpstreamNode(name=name, rpc_url=follower.rpc_url, ws_url=follower.ws_url, grpc_url=follower.grpc_url)
            )
            self.report("chain", f"{name}: a follower of the devnode, RPC {follower.rpc_url} (pid {follower.pid})")
        updates["upstreams"] = pool
        record_followers(self.home, pool)  # for the operator's commands (gateway upstreams)
        return updates

    def _start_actors(self, resolved: Settings, *, before_serve: bool) -> None:
        """The groups of actors/service.py started (or found: the app's Service deployment starts them too)
        at this point, in the reverse of their stop order."""
        for part, line in start_groups(resolved, self.settings, before_serve=before_serve):
            self.report(part, line)

    def _ports(self) -> list[tuple[str, int]]:
        s = self.settings
        ports = [(s.host, s.port)]
        if s.grpc_servers > 0 and (s.embedded_chain or s.geyser_node() is not None):
            ports.append((s.host, s.grpc_port))
        if not s.ray_address or s.ray_address == "local":  # the local Ray's metrics agent
            ports.append(("127.0.0.1", s.metrics_export_port))
        if s.embedded_chain:
            ports += [("127.0.0.1", s.devnode_rpc_port), ("127.0.0.1", s.devnode_ws_port)]
            ports.append(("127.0.0.1", s.devnode_grpc_port))
        return ports

    def stop(self) -> None:
        """Each part in reverse order, each timed; within ``STOP_BUDGET_S`` in all (serve_runtime says how)."""
        began = time.monotonic()
        while self._stops:
            name, stop = self._stops.pop()
            step = time.monotonic()
            try:
                stop()
                self.report(name, f"stopped ({time.monotonic() - step:.1f} s)")
            except Exception:
                log.exception("stopping %s failed", name)
        took = time.monotonic() - began
        if took > STOP_BUDGET_S:
            log.warning(
                "the stop took %.1f s, over the %.0f s grace period docs/operations.md asks for", took, STOP_BUDGET_S
            )


def replicas_report(settings: Settings) -> str:
    autoscaling = settings.ingress_autoscaling
    on_port = ", on the port themselves" if settings.ingress_mode == "reuseport" else ""
    if autoscaling is None:
        return f"{settings.ingress_replicas} ingress replica(s){on_port}"
    return (
        f"{autoscaling.min_replicas} to {autoscaling.max_replicas} ingress replicas{on_port}, autoscaled at "
        f"{autoscaling.target_ongoing_requests:g} requests in flight each"
    )


def _wait_healthy(url: str, timeout_s: float = 120.0) -> None:
    """Wait until the Serve app answers /health with 200: it is up and a node has answered it."""
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            with urllib.request.urlopen(url, timeout=2) as resp:
                if resp.status == 200:
                    return
        except urllib.error.HTTPError as exc:
            with contextlib.suppress(Exception):
                exc.close()
        except OSError:
            pass
        if time.monotonic() > deadline:
            raise RuntimeError(
                f"Serve: the gateway did not become healthy at {url} within {timeout_s:g} s "
                "(a replica did not start, or the node does not answer)"
            )
        time.sleep(0.25)


def _port_free(host: str, port: int) -> bool:
    """Whether a server could listen there: SO_REUSEADDR, as servers set it, so a port left in
    TIME_WAIT by the previous run counts as free and only a live listener counts as busy."""
    with socket.socket() as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host, port))
        except OSError:
            return False
    return True


def _redact(url: str) -> str:
    from urllib.parse import urlparse

    parsed = urlparse(url)
    if parsed.password:
        return url.replace(f":{parsed.password}@", ":***@")
    return url

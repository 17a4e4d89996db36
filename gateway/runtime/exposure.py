"""What the stack of a data dir listens on: every TCP listener of every process ``gateway up`` started.

The processes: ``gateway up`` itself (named in the HAProxy record it keeps under the data dir,
:data:`gateway.runtime.serve_runtime.HAPROXY_RECORD`, with the files directory that marks Serve's
HAProxy), everything under it (Ray's GCS, raylet, agents, workers and replicas; Redis; the devnode),
and what runs in a session of its own (PostgreSQL, started by ``pg_ctl``; HAProxy), found by the data
dir or HAProxy's files directory on its command line. ``gateway status`` shows them and
tests/integration/test_exposure.py fails on any not on loopback.
"""

from __future__ import annotations

import contextlib
import ipaddress
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psutil

from gateway.app.settings import (
    Settings,  #: Under the data dir: ``<HAProxy files dir>\n<pid of gateway up>\n`` (gateway.runtime.serve_runtime).
)

STARTER_RECORD = "haproxy.files"


@dataclass(frozen=True)
class Listener:
    pid: int
    process: str
    address: str
    port: int

    @property
    def loopback(self) -> bool:
        return is_loopback(self.address)

    def __str__(self) -> str:
        host = f"[{self.address}]" if ":" in self.address else self.address
        return f"{host}:{self.port} ({self.process}, pid {self.pid})"


def is_loopback(address: str) -> bool:
    """127.0.0.0/8, ::1, or an IPv4-mapped loopback address (Ray's gRPC servers listen on ``::ffff:127.0.0.1``)."""
    try:
        ip = ipaddress.ip_address(address.split("%", 1)[0])
    except ValueError:
        return False
    mapped = ip.ipv4_mapped if isinstance(ip, ipaddress.IPv6Address) else None
    return bool((mapped or ip).is_loopback)


def starter(home: Path) -> tuple[psutil.Process | None, str | None]:
    """The running ``gateway up`` of ``home`` and its HAProxy files directory, from its record."""
    try:
        files, pid = (home / STARTER_RECORD).read_text().split("\n")[:2]
        return psutil.Process(int(pid)), files
    except (OSError, ValueError, psutil.Error):
        return None, None


def stack_processes(home: Path, root: psutil.Process | None = None) -> list[psutil.Process]:
    """``gateway up`` of ``home`` (or ``root``), every process under it, and those naming the data dir or
    HAProxy's files directory on their command line (PostgreSQL and HAProxy run in sessions of their own)."""
    recorded, files = starter(home)
    root = root or recorded
    found: dict[int, psutil.Process] = {}
    if root is not None:
        with contextlib.suppress(psutil.Error):
            for proc in [root, *root.children(recursive=True)]:
                found[proc.pid] = proc
    markers = [str(home.resolve())] + ([files] if files else [])
    for proc in psutil.process_iter():
        if proc.pid in found:
            continue
        with contextlib.suppress(psutil.Error):
            if any(marker in part for part in proc.cmdline() for marker in markers):
                found[proc.pid] = proc
    return list(found.values())


def names(processes: list[psutil.Process]) -> set[str]:
    """The names of those of ``processes`` still running: a stack starts and reaps short-lived processes (Ray's
    workers, PostgreSQL's backends), so one listed a moment ago may have gone before it is named."""
    out: set[str] = set()
    for proc in processes:
        with contextlib.suppress(psutil.Error):
            out.add(proc.name())
    return out


def listeners(processes: list[psutil.Process]) -> list[Listener]:
    """Every listening TCP socket of ``processes`` (a process that has gone is skipped)."""
    out: set[Listener] = set()
    for proc in processes:
        with contextlib.suppress(psutil.Error):
            name = proc.name()
            for conn in proc.net_connections(kind="inet"):
                if conn.status == psutil.CONN_LISTEN and conn.laddr:
                    out.add(Listener(proc.pid, name, str(conn.laddr.ip), int(conn.laddr.port)))
    return sorted(out, key=lambda item: (item.port, item.pid))


#: The setting that allows a plaintext gRPC stream on a routable address (Settings.grpc_allow_plaintext_on_network).
PLAINTEXT_OVERRIDE = "GATEWAY_GRPC_ALLOW_PLAINTEXT_ON_NETWORK"


def host_is_loopback(host: str) -> bool:
    return host == "localhost" or is_loopback(host)


def network_refusals(settings: Settings) -> list[str]:
    """Why ``gateway up`` must not start with ``settings`` on a routable ``host`` (docs/operations.md, Network
    exposure): the gRPC stream in plaintext (API keys in ``x-token`` in clear) without the loudly named
    override, no ``public_url`` (the owner's sign-in names the public domain), and HAProxy's ingress without a
    shared edge secret (a node without it makes every client look
    like its HAProxy: one per-address bucket for all; on a cluster each node's ``ray start`` needs the same)."""
    if host_is_loopback(settings.host):
        return []
    refusals = []
    grpc_on = settings.grpc_servers > 0 and (settings.embedded_chain or settings.geyser_node() is not None)
    if grpc_on and settings.grpc_tls_cert is None and not settings.grpc_allow_plaintext_on_network:
        refusals.append(
            f"the gRPC stream would be plaintext on {settings.host}:{settings.grpc_port}, API keys in clear on the "
            f"network: set GATEWAY_GRPC_TLS_CERT and GATEWAY_GRPC_TLS_KEY, or {PLAINTEXT_OVERRIDE}=true to accept it "
            "(a TLS-terminating proxy in front), or GATEWAY_GRPC_SERVERS=0"
        )
    if not settings.public_url:  # the address it listens on names no host a browser or a wallet knows
        refusals.append(
            f"GATEWAY_PUBLIC_URL (public_url) is not set with GATEWAY_HOST={settings.host}: the owner's Sign-In "
            "With Solana must name the domain browsers reach the gateway at (https://rpc.example.com)"
        )
    joined = bool(settings.ray_address) and settings.ray_address != "local"  # a local Ray gets a generated one
    if settings.ingress_mode == "haproxy" and joined and not settings.edge_secret:
        refusals.append(
            f"GATEWAY_EDGE_SECRET is not set with GATEWAY_HOST={settings.host}: without the same secret in every "
            "node's environment (cluster.yaml), the replicas cannot tell clients apart behind HAProxy"
        )
    return refusals


def replica_refusal(settings: Settings, environ: dict[str, str]) -> str | None:
    """Why an ingress replica must not serve on this node: a routable ``host`` behind HAProxy and no edge
    secret in the environment this node's Ray was started with (each node's HAProxy and replicas read it)."""
    from gateway.transports.ray_edge import EDGE_SECRET_ENV

    if settings.ingress_mode != "haproxy" or host_is_loopback(settings.host) or environ.get(EDGE_SECRET_ENV):
        return None
    return (
        f"{EDGE_SECRET_ENV} is not in this node's environment (set it before `ray start`, the same on every "
        f"node: cluster.yaml): behind HAProxy on {settings.host} every client would share HAProxy's address"
    )


def serve_internal_grpc_on_loopback() -> None:
    """On a local Ray that listens on loopback only (gateway.runtime.serve_runtime.loopback_only_ray), bind
    the replica's inter-deployment gRPC server on the node's loopback address: Serve binds it ``[::]:0``,
    with no option, after the replica's class is constructed. On a cluster (routable node addresses) it
    is left alone."""
    import ray
    from ray.serve._private import replica

    base = getattr(replica, "add_port_to_grpc_server")  # noqa: B009  # not in the module's typed exports
    node_ip = str(ray.util.get_node_ip_address())  # type: ignore[no-untyped-call]
    if getattr(base, "gateway_loopback", False) or not is_loopback(node_ip):
        return

    def on_loopback(server: Any, address: str) -> int:  # the node's own loopback address (127.0.0.x)
        port: int = base(server, address.replace("[::]:", f"{node_ip}:", 1))
        return port

    on_loopback.gateway_loopback = True  # type: ignore[attr-defined]
    setattr(replica, "add_port_to_grpc_server", on_loopback)  # noqa: B010

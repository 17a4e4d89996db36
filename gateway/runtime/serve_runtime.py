"""Ray and the Serve app: which Serve settings are used, and why (figures in docs/performance.md, bench/).

Serve's default path (HTTP → proxy actor → replica) is about a tenth as fast here as direct ingress
(the replica serves HTTP itself; figures in bench/README.md). So the ingress replicas serve HTTP directly, and with
``ingress_mode = "haproxy"`` Ray's bundled HAProxy gives them one stable port. These settings are
read by Ray's processes at start, so they go into the environment before ``ray.init``.
"""

from __future__ import annotations

import contextlib
import ipaddress
import json
import logging
import os
import secrets
import shutil
import socket
import sys
import tempfile
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import psutil

from actors.cluster import bounded, cluster_reachable
from gateway.app.settings import Settings
from gateway.runtime.cluster import SERVE_APP_NAME, SERVE_STOP_S, STOP_GRACE_S, STOP_SLACK_S
from gateway.runtime.exposure import STARTER_RECORD
from gateway.runtime.haproxy_edge import BINARY_ENV, CORS_ENV, TIMEOUT_ENV
from gateway.runtime.leftovers import left_behind, record, stop_processes
from gateway.runtime.ports import free_port
from gateway.runtime.private_files import secure_ray_token
from gateway.runtime.ray_timers import RAY_TIMERS
from gateway.runtime.shared_port import migrate_req_warning
from gateway.transports.ray_edge import CALLBACK_IMPORT_PATH, EDGE_SECRET_ENV

#: Under the data dir: this stack's HAProxy files directory, the marker of its HAProxy processes.
HAPROXY_RECORD = STARTER_RECORD
#: Ray's worker niceness (``RayConfig::worker_niceness``), spelled as Ray reads it from the environment.
NICENESS_ENV = "RAY_worker_niceness"
#: How long a cluster to join has to accept a connection before it counts as unreachable.
RAY_PROBE_TIMEOUT_S = 5.0
#: ``ray_address`` values that are not a cluster to join ("local" starts one; "auto" finds one).
_NOT_AN_ADDRESS = ("local", "auto")

log = logging.getLogger(__name__)


def ray_address_unreachable(address: str, timeout_s: float = RAY_PROBE_TIMEOUT_S) -> str | None:
    """Why the cluster at ``address`` (``host:port`` or ``ray://host:port``) cannot be joined, or None
    when it accepts a connection (or the address is not one to probe: ``auto``)."""
    if address in _NOT_AN_ADDRESS:
        return None
    host, sep, port = address.split("://", 1)[-1].rpartition(":")
    if not sep or not port.isdigit():
        return None  # Ray says what is wrong with the address
    try:
        with socket.create_connection((host.strip("[]"), int(port)), timeout=timeout_s):
            return None
    except OSError as exc:
        return f"nothing answers at {address} ({exc.strerror or exc})"


def cluster_host_warning(settings: Settings, nodes: int) -> str | None:
    """Why ``host`` will not serve a cluster of ``nodes`` behind HAProxy, or None. Each node runs its own
    HAProxy on ``host:port``, and every replica listens on ``host`` too (Serve's HTTP options): on a
    loopback address a node's HAProxy reaches only the replicas of its own node (Serve warns "won't accept
    connections from HAProxy on other nodes"), and clients on other machines reach no HAProxy at all. With
    ``reuseport`` the replicas listen on ``host:port`` themselves: on loopback no other machine reaches them."""
    if nodes < 2 or settings.ingress_mode not in ("haproxy", "reuseport"):
        return None
    try:
        loopback = ipaddress.ip_address(settings.host).is_loopback
    except ValueError:
        loopback = settings.host == "localhost"
    if not loopback:
        return None
    unreachable = (
        "each node's HAProxy reaches only its own node's replicas, and no other machine reaches it"
        if settings.ingress_mode == "haproxy"
        else "each node's replicas listen on the port where no other machine reaches them"
    )
    return (
        f"host {settings.host} (GATEWAY_HOST) on a cluster of {nodes} nodes: {unreachable}; set "
        "GATEWAY_HOST=0.0.0.0 (docs/configuration.md, Ray cluster)"
    )


def processes_naming(marker: str, among: Iterable[psutil.Process] | None = None) -> list[psutil.Process]:
    """Live processes (of ``among``, by default all) whose command line names ``marker`` (a path, or a
    Ray worker's process title). One that has gone, is a zombie or is not ours to read is no match."""
    found = []
    for proc in psutil.process_iter() if among is None else among:
        with contextlib.suppress(psutil.Error):
            if any(marker in part for part in proc.cmdline()):
                found.append(proc)
    return found


def stop_processes_naming(marker: str, grace_s: float = 5.0) -> int:
    """Stop the processes whose command line names ``marker`` (this stack's HAProxy files); how many.
    Serve's HAProxy runs in a session of its own and is stopped by its manager actor; when a SIGTERM to
    the whole process group ends that actor first, nothing else would stop it, and it keeps the port."""
    return stop_processes(processes_naming(marker), grace_s)


def stop_left_haproxy(home: Path) -> bool:
    """Stop the HAProxy a ``gateway up`` killed with SIGKILL left on the port (its manager actor went with
    Ray; :mod:`gateway.runtime.leftovers`), found by its files directory. True if one was running."""
    files = left_behind(home / HAPROXY_RECORD)
    if files is None or not files.startswith(tempfile.gettempdir()):
        return False
    stopped = stop_processes_naming(files)
    shutil.rmtree(files, ignore_errors=True)
    return stopped > 0


def ingress_env(settings: Settings, haproxy_files: str) -> dict[str, str]:
    """Ray Serve's settings for this stack. Ray's own helper ports (fallback proxy, HAProxy stats and
    metrics) and HAProxy's files default to fixed values shared by every Ray on the machine, so each
    stack takes free ports and its own ``haproxy_files`` directory: a developer's ``make up`` and
    ``make test`` can then run side by side.
    """
    env = {
        "RAY_SERVE_RUN_USER_CODE_IN_SEPARATE_THREAD": "0",
        # A replica that failed its health checks (no ``check_health`` of the gateway's: it did not answer, its
        # one event loop stuck or its process stopped) is killed at once, not asked to drain for
        # graceful_shutdown_timeout_s (32 s) first: it cannot, and in reuseport mode its listener keeps taking
        # its share of new connections until it is gone (docs/architecture.md, Ingress modes).
        "RAY_SERVE_FORCE_STOP_UNHEALTHY_REPLICAS": "1",
        "RAY_SERVE_REQUEST_PATH_LOG_BUFFER_SIZE": "1",
        "RAY_USAGE_STATS_ENABLED": "0",
        # Serve's controller runs its control loop (replica states, autoscaling, what it pushes to the
        # replicas and HAProxy) ten times a second by default, about 40 ms of CPU a second at rest here;
        # twice a second takes about 15 and is soon enough for all it decides: autoscaling waits its
        # delays (seconds), a stopping replica drains `drain_s`, a start is no slower (docs/performance.md).
        "RAY_SERVE_CONTROL_LOOP_INTERVAL_S": "0.5",
        # Ray adds an X-Request-ID of its own to every response; this removes it (the module says why).
        "RAY_SERVE_HTTP_PROXY_CALLBACK_IMPORT_PATH": CALLBACK_IMPORT_PATH,
        # uvicorn (Ray's HTTP servers) would otherwise take X-Forwarded-For from any peer on loopback as
        # the client's address, and behind Ray's HAProxy every peer is: any caller could choose its own
        # per-address bucket. Which forwarded address to believe is the gateway's `trusted_proxies`.
        "FORWARDED_ALLOW_IPS": "",
        # Ray's timers nothing of the gateway relies on, longer or off (the module says which and why).
        **RAY_TIMERS,
        # Ray starts its worker processes at nice 15, below every other process on the machine, so that a
        # CPU-bound task cannot starve the raylet. Here the workers are the service (the replicas, the
        # actors), waiting on I/O: at 15 HAProxy, PostgreSQL, Redis and a node on the same machine preempt
        # the replica whenever they wake: on 2 cores it answered 18% fewer unmetered requests a second than
        # at 0 (bench/README.md, "Ray's worker niceness"). At 0 they share the machine as equals. An
        # operator's own value (15 on a machine shared with CPU-bound work that matters more) is kept.
        NICENESS_ENV: os.environ.get(NICENESS_ENV, "0"),
    }
    if settings.ingress_mode in ("direct", "haproxy", "reuseport"):
        env["RAY_SERVE_ENABLE_DIRECT_INGRESS"] = "1"
        # Ray keeps a stopping replica draining for 30 s by default; set the drain from our settings.
        env["RAY_SERVE_DIRECT_INGRESS_MIN_DRAINING_PERIOD_S"] = str(settings.drain_s)
    if settings.ingress_mode == "direct":
        # The single replica listens on the service port itself.
        env["RAY_SERVE_DIRECT_INGRESS_MIN_HTTP_PORT"] = str(settings.port)
        env["RAY_SERVE_DIRECT_INGRESS_MAX_HTTP_PORT"] = str(settings.port)
    if settings.ingress_mode == "haproxy":
        env["RAY_SERVE_ENABLE_HA_PROXY"] = "1"
        # HAProxy runs through gateway-haproxy, which adds the client-address and body-deadline rules
        # (the module says why); Ray finds the real binary through it.
        env[BINARY_ENV] = str(Path(sys.executable).with_name("gateway-haproxy"))
        env[TIMEOUT_ENV] = f"{settings.request_body_timeout_s:g}"
        env[CORS_ENV] = json.dumps(settings.cors_allowed_origins)  # whether HAProxy's own 408 has CORS
        env[EDGE_SECRET_ENV] = settings.edge_secret or secrets.token_hex(16)
        env["RAY_SERVE_HAPROXY_NBTHREAD"] = "1"
        env["RAY_SERVE_HAPROXY_METRICS_ENABLED"] = "0"
        env["RAY_SERVE_HAPROXY_CONFIG_FILE_LOC"] = f"{haproxy_files}/haproxy.cfg"
        env["RAY_SERVE_HAPROXY_SOCKET_PATH"] = f"{haproxy_files}/admin.sock"
        env["RAY_SERVE_HAPROXY_SERVER_STATE_BASE"] = haproxy_files
        env["RAY_SERVE_HAPROXY_SERVER_STATE_FILE"] = f"{haproxy_files}/server-state"
        env["RAY_SERVE_HAPROXY_STATS_PORT"] = str(free_port())
        env["RAY_SERVE_HAPROXY_METRICS_PORT"] = str(free_port())
    env["RAY_SERVE_FALLBACK_PROXY_HTTP_PORT"] = str(free_port())
    env["RAY_SERVE_FALLBACK_PROXY_GRPC_PORT"] = str(free_port())
    return env


def loopback_only_ray() -> None:
    """Make the local Ray this process starts listen on loopback only, every process of it.

    Ray turns ``_node_ip_address="127.0.0.1"`` into the host's routable address (``services.
    resolve_ip_for_localhost``) unless ``RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER`` is off, a flag read once, when
    ``ray`` is first imported: here it is set for the processes Ray starts (which inherit it) and in this
    one. With it off, the GCS, raylet, workers and agents bind 127.0.0.1 (docs/operations.md, "What runs where";
    tests/integration/test_exposure.py lists them); with it on (Ray's default on Linux) they bind ``*``."""
    from ray._private import ray_constants

    os.environ[ray_constants.ENABLE_RAY_CLUSTERS_ENV_VAR] = "0"
    ray_constants.ENABLE_RAY_CLUSTER = False


#: The logger of Ray's driver-side token set-up (its start-up warning is said on gateway up's Ray line).
TOKEN_SETUP_LOGGER = "ray._private.authentication.authentication_token_setup"
#: Lines of Ray's processes that ``gateway up`` does not print: not the operator's business. Serve's stop
#: kills its controller while its own ``graceful_shutdown`` call is pending, and the raylet reports that call
#: as failed "with infinite retries remaining" on every stop.
RAY_NOISE = ("ServeController.graceful_shutdown failed",)
#: On a local Ray: Serve's warning that replicas on loopback "won't accept connections from HAProxy on other
#: nodes" (there are none). On a cluster it is kept (and :func:`cluster_host_warning` says it too).
LOCAL_RAY_NOISE = ("cross-node routing will fail",)


def quiet_ray_noise(noise: tuple[str, ...]) -> bool:
    """Print the lines Ray's processes and the cluster's error messages send this driver as Ray would,
    except those naming ``noise``. Both reach Ray's ``print_to_stdstream``: the error listener calls it by
    its module name (replaced here), the log printer through the dispatcher handler ``ray_print_logs``
    (replaced too). False when Ray's internals are not as expected (then everything is printed)."""
    try:
        from ray._private import worker
        from ray._private.ray_logging import global_worker_stdstream_dispatcher as dispatcher

        ignore_prefix = worker._should_ignore_worker_log_prefix(worker.global_worker)
        original = worker.print_to_stdstream
    except (ImportError, AttributeError):
        return False
    original = getattr(original, "gateway_original", original)

    def filtered(data: dict[str, Any], ignore_prefix: bool) -> None:
        lines = [line for line in data.get("lines", []) if not any(part in str(line) for part in noise)]
        if lines:
            original({**data, "lines": lines}, ignore_prefix)

    filtered.gateway_original = original  # type: ignore[attr-defined]
    worker.print_to_stdstream = filtered
    if any(name == "ray_print_logs" for name, _ in dispatcher.handlers):  # log_to_driver on
        dispatcher.remove_handler("ray_print_logs")
        dispatcher.add_handler("ray_print_logs", lambda data: filtered(data, ignore_prefix))
    return True


class ServeRuntime:
    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.ray_description = ""
        self._started_ray = False
        self._haproxy_files: str | None = None

    def start_ray(self) -> None:
        """Join the configured cluster, or else start a local Ray of this stack's own.

        The local start passes ``address="local"``: without an address, ``ray.init`` joins the cluster
        named in Ray's last-cluster file (``<ray temp dir>/ray_current_cluster``, left by ``ray start``),
        and after that cluster ended without ``ray stop`` it waits for the dead address forever. A
        cluster is joined only when ``ray_address`` (or ``RAY_ADDRESS``) names one, and one that does
        not answer fails the start at once, saying so (Ray itself would wait for it without end)."""
        address = self.settings.ray_address
        join = bool(address) and address != "local"
        if join:
            assert address is not None
            unreachable = ray_address_unreachable(address)
            if unreachable is not None:
                raise RuntimeError(
                    f"Ray: cannot join the cluster of ray_address (RAY_ADDRESS): {unreachable}; start that "
                    "cluster, or leave ray_address and RAY_ADDRESS empty to run a local Ray"
                )
        import ray

        # Ray's processes inherit the driver's environment; these must be in place before they start.
        # Short, under /tmp: HAProxy's admin socket path has a length limit. Removed again by stop().
        self._haproxy_files = tempfile.mkdtemp(prefix="gw-haproxy-")
        record(self._record, self._haproxy_files)
        os.environ.update(ingress_env(self.settings, self._haproxy_files))
        for fixed in secure_ray_token(create=not join):  # Ray would write a new one readable by all
            log.warning("Ray's token: %s", fixed)
        if join:
            ray.init(address=address, namespace="gateway", logging_level=logging.WARNING)
            listed: list[dict[str, Any]] = ray.nodes()  # type: ignore[no-untyped-call]
            nodes = len([node for node in listed if node["Alive"]])
            self.ray_description = f"joined cluster {address} ({nodes} node{'s' if nodes > 1 else ''})"
            quiet_ray_noise(RAY_NOISE)
            warning = cluster_host_warning(self.settings, nodes)
            if warning is not None:
                log.warning("%s", warning)
        else:
            loopback_only_ray()
            # Ray warns at every start that it turned token authentication on; the Ray line below says so
            logging.getLogger(TOKEN_SETUP_LOGGER).setLevel(logging.ERROR)
            ray.init(
                address="local",
                namespace="gateway",
                include_dashboard=False,
                logging_level=logging.WARNING,
                _node_ip_address="127.0.0.1",
                _metrics_export_port=self.settings.metrics_export_port,  # scraped by Prometheus: docs/operations.md
            )
            quiet_ray_noise(RAY_NOISE + LOCAL_RAY_NOISE)
            port = self.settings.metrics_export_port
            token = os.environ.get("RAY_AUTH_MODE", "token") != "disabled"
            self.ray_description = (
                f"local Ray instance on 127.0.0.1 only{', token authentication on' if token else ''}; "
                f"metrics http://127.0.0.1:{port}/metrics (ops/prometheus.yml)"
            )
        self._started_ray = True

    def deploy(self) -> None:
        from ray import serve

        from gateway.runtime.ingress import build_app

        s = self.settings
        from ray.serve.schema import LoggingConfig

        # Serve's own actors (controller, HAProxy manager, proxy) log every deploy step at INFO, which
        # buries `gateway up`'s own lines; their warnings and errors still show.
        quiet = LoggingConfig(log_level="WARNING", enable_access_log=False)
        # and this process's Serve client logs each step at INFO too ("Connecting to existing Serve app …
        # will not be applied" on every start, though nothing existed); `gateway up` says what matters
        logging.getLogger("ray.serve").setLevel(logging.WARNING)
        http = {"host": s.host, "port": s.port}
        if s.ingress_mode == "reuseport":
            # The replicas listen on the service port themselves (gateway/runtime/shared_port.py). With direct
            # ingress Serve still runs a proxy on the head node, with SO_REUSEPORT, on http_options' port: it
            # would take a share of the service port's connections. It and each replica's port of Serve's
            # own go to loopback, where nothing is sent to them.
            http = {"host": "127.0.0.1", "port": free_port()}
            warning = migrate_req_warning()
            if warning is not None:
                log.warning("%s", warning)
        serve.start(http_options=http, logging_config=quiet, detached=False)
        serve.run(build_app(s), name=SERVE_APP_NAME, route_prefix="/", blocking=False)

    def stop_serve(self) -> None:
        """Shut the Serve app down (its replicas settle usage and give back leases and slices), within
        ``SERVE_STOP_S``; before the actors the replicas give back to (the account shards) stop."""
        import ray
        from ray import serve

        if self._started_ray and ray.is_initialized() and cluster_reachable():
            within = min(self.settings.drain_s + STOP_GRACE_S + STOP_SLACK_S, SERVE_STOP_S)
            bounded(serve.shutdown, within, "Serve shutdown (the replicas' drain and settlement)", cluster_reachable)

    def stop(self) -> None:
        try:
            if self._started_ray:
                self._stop_ray()
        finally:
            if self._haproxy_files is not None:
                stop_processes_naming(self._haproxy_files)
                shutil.rmtree(self._haproxy_files, ignore_errors=True)
                self._record.unlink(missing_ok=True)
                self._haproxy_files = None

    @property
    def _record(self) -> Path:
        return self.settings.resolved_home / HAPROXY_RECORD

    def _stop_ray(self) -> None:
        import ray

        try:
            self.stop_serve()  # done already by a Stack's stop; here for a runtime stopped alone
        finally:
            ray.shutdown()
            self._started_ray = False

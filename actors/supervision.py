"""How every actor of the service is started, placed and stopped: named, detached actors in namespace
``gateway`` (``get_if_exists``), restarted by Ray after a crash (``max_restarts=-1``), so one exists per
cluster however many drivers start it. Needs ``ray.init`` done.
"""

from __future__ import annotations

import contextlib
import logging
from typing import Any

from actors.cluster import ACTORS_STOP_S, NAMESPACE, bounded, cluster_reachable
from actors.metrics import with_metrics
from actors.pool_health import read_pool_from_cluster

log = logging.getLogger(__name__)

#: The CPU an actor reserves: next to none (the actors wait on I/O; a node runs thousands at this), but not
#: none. Ray places an actor that asks for no resource at all on a node picked at random and there ignores
#: its scheduling strategy (measured on two nodes: soft node affinity kept 1 of 4 where asked, SPREAD put
#: 4 of 4 on one node; with this, 4 of 4 and 2 + 2).
ACTOR_CPUS = 0.001


def start_singleton(name: str, cls: type, *args: Any, member: int | None = None) -> Any:
    """Start (or find) the cluster's one actor ``name`` of ``cls``; returns its handle. ``member``: its
    index in a pool (:func:`pool_placement`)."""
    import ray

    remote_cls: Any = ray.remote(num_cpus=ACTOR_CPUS, max_restarts=-1)(in_cluster(cls))
    placement = {} if member is None else {"scheduling_strategy": pool_placement(member)}
    return remote_cls.options(
        name=name, namespace=NAMESPACE, get_if_exists=True, lifetime="detached", enable_task_events=False, **placement
    ).remote(*args)


def in_cluster(cls: type) -> type:
    """``cls`` whose instances, before their own constructor, install the Ray metrics backend and read the
    pool of nodes' health from the ``upstream-health`` actor (every actor's process does both)."""
    measured = with_metrics(cls)

    def __init__(self: Any, *args: Any, **kwargs: Any) -> None:
        read_pool_from_cluster()
        measured.__init__(self, *args, **kwargs)  # type: ignore[misc]

    return type(cls.__name__, (measured,), {"__init__": __init__, "__qualname__": cls.__qualname__})


def pool_placement(member: int) -> Any:
    """Where member ``member`` of a pool (the shards, the racers, the dispatchers) starts: the cluster's
    alive nodes in turn, so a pool is spread over the nodes and a lost node takes only its share (Ray's
    ``SPREAD`` is a round robin over every actor it places, so a pool's members could share a node). Soft:
    a member whose node is gone (at start, or when Ray restarts it) goes to any node alive."""
    import ray
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    nodes = sorted(str(node["NodeID"]) for node in ray.nodes() if node["Alive"])  # type: ignore[no-untyped-call]
    if not nodes:
        return "DEFAULT"
    return NodeAffinitySchedulingStrategy(node_id=nodes[member % len(nodes)], soft=True)


def stop_singleton(name: str, timeout_s: float = 20.0) -> None:
    stop_actors([name], timeout_s)


def stop_actors(names: list[str], timeout_s: float = ACTORS_STOP_S) -> None:
    """Ask every named actor to shut down, all at once, then end them (a detached actor outlives the driver
    otherwise). Bounded as a whole: a cluster that stopped answering must not hold up the stop once per
    actor; those whose shutdown did not finish are named in the log."""
    import ray

    if not cluster_reachable():  # a SIGTERM to the whole process group stopped the GCS: the actors went with it
        log.warning("stopping: the Ray cluster no longer answers; its actors are gone with it")
        return

    def stop() -> None:
        handles: dict[str, Any] = {}
        for name in names:
            with contextlib.suppress(ValueError):
                handles[name] = ray.get_actor(name, namespace=NAMESPACE)
        asked: dict[Any, str] = {handle.shutdown.remote(): name for name, handle in handles.items()}
        pending: list[Any] = []
        if asked:
            _, pending = ray.wait(list(asked), num_returns=len(asked), timeout=max(0.5, timeout_s - 1.0))
        if pending:
            log.warning("stopping: gave up on the shutdown of %s", ", ".join(sorted(asked[ref] for ref in pending)))
        for handle in handles.values():
            with contextlib.suppress(Exception):
                ray.kill(handle, no_restart=True)

    bounded(stop, timeout_s, f"the stop of {', '.join(names)}")

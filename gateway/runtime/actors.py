"""Where the service's actors are created: each feature's plain actor class (``<feature>/*_actor.py``)
wrapped with ``ray.remote`` and its options, and stopped again. Needs ``ray.init`` done.

Singletons are named, detached actors in namespace ``gateway`` (``get_if_exists``), restarted by Ray
after a crash (``max_restarts=-1``), so one exists per cluster however many drivers start it.
"""

from __future__ import annotations

import contextlib
import logging
import warnings
from typing import Any

from gateway.credits.watcher_actor import DEFAULT_INTERVAL_S, DepositWatcherActor
from gateway.grpc.stream_actor import GrpcStreamActor
from gateway.limits.shard_actor import AccountShard
from gateway.limits.shards import shard_name
from gateway.runtime.cluster import ACTORS_STOP_S, NAMESPACE, bounded, cluster_reachable, send_racer_names
from gateway.runtime.metrics import with_metrics
from gateway.sending.racer_actor import SendRacerActor
from gateway.sending.reconciler_actor import SendReconcilerActor
from gateway.signals.classifier_actor import SignalClassifierActor
from gateway.webhooks.dispatcher_actor import WebhookDispatcherActor
from gateway.webhooks.watcher_actor import WebhookWatcherActor

log = logging.getLogger(__name__)

#: The CPU an actor reserves: next to none (the actors wait on I/O; a node runs thousands at this), but not
#: none. Ray places an actor that asks for no resource at all on a node picked at random and there ignores
#: its scheduling strategy (measured on two nodes: soft node affinity kept 1 of 4 where asked, SPREAD put
#: 4 of 4 on one node; with this, 4 of 4 and 2 + 2).
ACTOR_CPUS = 0.001
DEPOSIT_WATCHER = "deposit-watcher"
SEND_RECONCILER = "send-reconciler"
SIGNAL_CLASSIFIER = "signal-classifier"
WEBHOOK_WATCHER = "webhook-watcher"


def account_shard_names(count: int) -> list[str]:
    """The account-shard actors; an account's is ``shard_of(pubkey, count)`` (gateway/limits/shards.py)."""
    return [shard_name(n) for n in range(count)]


def webhook_dispatcher_names(count: int) -> list[str]:
    return [f"webhook-dispatcher-{n}" for n in range(count)]


def grpc_stream_names(count: int) -> list[str]:
    return [f"grpc-stream-{n}" for n in range(count)]


def start_singleton(name: str, cls: type, *args: Any, member: int | None = None) -> Any:
    """Start (or find) the cluster's one actor ``name`` of ``cls``; returns its handle. ``member``: its
    index in a pool (:func:`pool_placement`)."""
    import ray

    remote_cls: Any = ray.remote(num_cpus=ACTOR_CPUS, max_restarts=-1)(with_metrics(cls))
    placement = {} if member is None else {"scheduling_strategy": pool_placement(member)}
    return remote_cls.options(
        name=name, namespace=NAMESPACE, get_if_exists=True, lifetime="detached", enable_task_events=False, **placement
    ).remote(*args)


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


def start_deposit_watcher(settings: dict[str, Any], interval_s: float = DEFAULT_INTERVAL_S) -> Any:
    return start_singleton(DEPOSIT_WATCHER, DepositWatcherActor, settings, interval_s)


def stop_deposit_watcher() -> None:
    stop_singleton(DEPOSIT_WATCHER)


def start_send_racers(settings: dict[str, Any], count: int) -> list[Any]:
    """The pool of send-racer actors: each one named and restarted after a crash like a singleton."""
    return [start_singleton(name, SendRacerActor, settings, member=n) for n, name in enumerate(send_racer_names(count))]


def stop_send_racers(count: int) -> None:
    stop_actors(send_racer_names(count))


class RestartingAccountShard(AccountShard):
    """The shard as Ray runs it: told whether Ray is restarting it, so that a restarted one's buckets
    fill from its start (slices of the previous incarnation may still be in use: gateway/limits/shards.py)."""

    def __init__(self, index: int) -> None:
        import ray

        with warnings.catch_warnings():  # Ray 2.60's property reads its own deprecated actor_id: not ours to fix
            warnings.simplefilter("ignore", DeprecationWarning)
            restarted = bool(ray.get_runtime_context().was_current_actor_reconstructed)
        super().__init__(index, restarted=restarted)


def start_account_shards(count: int) -> list[Any]:
    """The account-shard actors: each named and restarted after a crash like a singleton."""
    return [
        start_singleton(name, RestartingAccountShard, n, member=n) for n, name in enumerate(account_shard_names(count))
    ]


def stop_account_shards(count: int) -> None:
    stop_actors(account_shard_names(count))


def start_send_reconciler(settings: dict[str, Any]) -> Any:
    return start_singleton(SEND_RECONCILER, SendReconcilerActor, settings)


def start_signal_classifier(settings: dict[str, Any]) -> Any:
    return start_singleton(SIGNAL_CLASSIFIER, SignalClassifierActor, settings)


def stop_signal_classifier() -> None:
    stop_singleton(SIGNAL_CLASSIFIER)


def start_webhook_watcher(settings: dict[str, Any]) -> Any:
    return start_singleton(WEBHOOK_WATCHER, WebhookWatcherActor, settings)


def stop_webhook_watcher() -> None:
    stop_singleton(WEBHOOK_WATCHER)


def start_webhook_dispatchers(settings: dict[str, Any], count: int) -> list[Any]:
    """The pool of webhook dispatchers: each one named and restarted after a crash like a singleton."""
    names = webhook_dispatcher_names(count)
    return [start_singleton(name, WebhookDispatcherActor, settings, name, member=n) for n, name in enumerate(names)]


def stop_webhook_dispatchers(count: int) -> None:
    stop_actors(webhook_dispatcher_names(count))


def start_grpc_streams(settings: dict[str, Any], count: int, timeout_s: float = 60.0) -> list[dict[str, Any]]:
    """The gRPC stream server actors (each named and restarted like a singleton); returns their status
    once every one listens, or raises why one could not."""
    import ray

    from gateway.runtime.shards import RayShards  # (it names the actors by this module's namespace)

    account_shards = int(settings.get("account_shards", 0))
    shards = RayShards(account_shards) if account_shards > 0 else None  # the limits the replicas share
    names = grpc_stream_names(count)
    handles = [start_singleton(name, GrpcStreamActor, settings, name, shards) for name in names]
    return [ray.get(handle.wait_ready.remote(timeout_s), timeout=timeout_s + 10) for handle in handles]


def service_actor_names(settings: dict[str, Any]) -> list[str]:
    """Every actor ``gateway up`` starts, in the order they are stopped."""
    return [
        *grpc_stream_names(int(settings.get("grpc_servers", 0))),
        *webhook_dispatcher_names(int(settings.get("webhook_dispatchers", 0))),
        WEBHOOK_WATCHER,
        SIGNAL_CLASSIFIER,
        SEND_RECONCILER,
        *send_racer_names(int(settings.get("send_racers", 0))),
        *account_shard_names(int(settings.get("account_shards", 0))),
        DEPOSIT_WATCHER,
    ]

"""Every actor of the service, in one list of groups (one group per module of ``actors/``): its actors'
names, how it is started and what ``gateway up`` reports of it. Two callers start them, both through
:func:`start_groups`, each group in the reverse of the list's order: the Serve application's ``Service``
deployment (gateway/runtime/service_deployment.py) starts all of them, whoever deployed the app
(``gateway up``, ``serve run``, ``serve deploy``, KubeRay); ``gateway/runtime/stack.py`` starts the groups
the replicas call from their first request (``before_serve``) before Serve deploys, and finds the others
once Serve answers, to report them. Every start is get-or-create by name, so each actor exists once per
cluster however many starts there are. ``gateway up``'s stop and ``gateway actors stop`` end every actor
of the list at once (``service_actor_names``, in the list's order, which ``gateway status`` shows too).
Adding an actor: its feature's ``*_actor.py``, its module here, one group below.

Not on the features' declarations (``gateway/pipeline/declaration.py``): only the runtime and the CLI may import
``actors/`` (the ``actors-started-by-the-runtime`` contract).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from actors.account_shards import account_shard_names, start_account_shards
from actors.deposit_watcher import DEPOSIT_WATCHER, start_deposit_watcher
from actors.grpc_streams import grpc_stream_names, start_grpc_streams
from actors.send_racers import start_send_racers
from actors.send_reconciler import SEND_RECONCILER, start_send_reconciler
from actors.signal_classifier import SIGNAL_CLASSIFIER, start_signal_classifier
from actors.upstream_health import start_upstream_health
from actors.webhook_dispatchers import start_webhook_dispatchers, webhook_dispatcher_names
from actors.webhook_watcher import WEBHOOK_WATCHER, start_webhook_watcher
from gateway.app.settings import Settings
from gateway.core.upstreams import Role, serving
from gateway.sending.racers import send_racer_names
from gateway.upstreams.health_actor import UPSTREAM_HEALTH
from gateway.webhooks.targets import receivers_report

#: Starts a group from the settings every process is sent and the settings as configured (a report may
#: say which default applied); returns ``gateway up``'s lines about it.
Start = Callable[[Settings, Settings], list[str]]


@dataclass(frozen=True)
class ActorGroup:
    #: ``gateway up``'s report names it so
    part: str
    #: its actors' names, from the settings as a dict (``Settings.model_dump``; none when its count is 0)
    names: Callable[[Mapping[str, Any]], list[str]]
    start: Start
    #: started before Serve deploys the replicas, which call it from their first request
    before_serve: bool = False


def _count(setting: str, names: Callable[[int], list[str]]) -> Callable[[Mapping[str, Any]], list[str]]:
    return lambda settings: names(int(settings.get(setting, 0)))


def _one(name: str) -> Callable[[Mapping[str, Any]], list[str]]:
    return lambda settings: [name]


def _grpc_streams(settings: Settings, configured: Settings) -> list[str]:
    if not settings.grpc_stream:
        why = "no node serving geyser (upstreams, upstream_grpc_url)" if settings.grpc_servers else "grpc_servers = 0"
        return [f"off: {why}"]
    start_grpc_streams(settings.model_dump(mode="json"), settings.grpc_servers)
    scheme = "TLS" if settings.grpc_tls_cert else "plaintext"
    where = f"{settings.host}:{settings.grpc_port} ({scheme})"
    nodes = ", ".join(n.name for n in serving(settings.pool_nodes(), Role.GEYSER))  # names: a URL may hold a key
    return [f"{where}, {settings.grpc_servers} server actor(s) re-serving the geyser stream of {nodes}"]


def _webhook_dispatchers(settings: Settings, configured: Settings) -> list[str]:
    start_webhook_dispatchers(settings.model_dump(mode="json"), settings.webhook_dispatchers)
    return [f"{settings.webhook_dispatchers} dispatcher actor(s) delivering them", receivers_report(configured)]


def _webhook_watcher(settings: Settings, configured: Settings) -> list[str]:
    start_webhook_watcher(settings.model_dump(mode="json"))
    return ["watcher actor writing transaction and signal delivery jobs"]


def _signal_classifier(settings: Settings, configured: Settings) -> list[str]:
    start_signal_classifier(settings.model_dump(mode="json"))
    return [f"classifier actor on {', '.join(settings.signal_programs)}"]


def _send_reconciler(settings: Settings, configured: Settings) -> list[str]:
    start_send_reconciler(settings.model_dump(mode="json"))
    legs = ", ".join(settings.send_legs)
    return [f"{settings.send_racers} send-racer actor(s) on {legs}; reconciler actor"]


def _send_racers(settings: Settings, configured: Settings) -> list[str]:
    start_send_racers(settings.model_dump(mode="json"), settings.send_racers)
    return []  # told with the reconciler's line


def _account_shards(settings: Settings, configured: Settings) -> list[str]:
    if settings.account_shards == 0:
        return []
    start_account_shards(settings.account_shards)
    return [f"{settings.account_shards} account-shard actor(s) owning rate and concurrency"]


def _upstream_health(settings: Settings, configured: Settings) -> list[str]:
    start_upstream_health(settings.model_dump(mode="json"))
    nodes = settings.pool_nodes()
    return [f"owner of the pool's health: {len(nodes)} node(s), {', '.join(n.name for n in nodes)}"]


def _deposit_watcher(settings: Settings, configured: Settings) -> list[str]:
    start_deposit_watcher(settings.model_dump(mode="json"), interval_s=settings.deposit_poll_s)
    return ["watcher actor following the deposit wallet's USDC account"]


#: In the order they are stopped (and listed by ``gateway status``).
GROUPS: tuple[ActorGroup, ...] = (
    ActorGroup("gRPC", _count("grpc_servers", grpc_stream_names), _grpc_streams),
    ActorGroup("webhooks", _count("webhook_dispatchers", webhook_dispatcher_names), _webhook_dispatchers),
    ActorGroup("webhooks", _one(WEBHOOK_WATCHER), _webhook_watcher),
    ActorGroup("signals", _one(SIGNAL_CLASSIFIER), _signal_classifier),
    ActorGroup("sending", _one(SEND_RECONCILER), _send_reconciler),
    ActorGroup("sending", _count("send_racers", send_racer_names), _send_racers, before_serve=True),
    ActorGroup("limits", _count("account_shards", account_shard_names), _account_shards, before_serve=True),
    ActorGroup("deposits", _one(DEPOSIT_WATCHER), _deposit_watcher),
    # last: stopped after every process that reads the pool from it, started before them all
    ActorGroup("nodes", _one(UPSTREAM_HEALTH), _upstream_health, before_serve=True),
)


def start_groups(
    settings: Settings, configured: Settings, *, before_serve: bool | None = None
) -> list[tuple[str, str]]:
    """Start (or find) the groups, ``before_serve`` ones or the others (None: all, those first), each in the
    reverse of the list's order; their report lines as ``(part, line)``."""
    lines: list[tuple[str, str]] = []
    for phase in (True, False) if before_serve is None else (before_serve,):
        for group in reversed(GROUPS):
            if group.before_serve == phase:
                lines += [(group.part, line) for line in group.start(settings, configured)]
    return lines


def service_actor_names(settings: Mapping[str, Any]) -> list[str]:
    """Every actor's name, in the list's order (``settings``: ``Settings.model_dump``)."""
    return [name for group in GROUPS for name in group.names(settings)]

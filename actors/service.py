"""Every actor ``gateway up`` starts, by name, in the order they are stopped."""

from __future__ import annotations

from typing import Any

from actors.account_shards import account_shard_names
from actors.deposit_watcher import DEPOSIT_WATCHER
from actors.grpc_streams import grpc_stream_names
from actors.send_reconciler import SEND_RECONCILER
from actors.signal_classifier import SIGNAL_CLASSIFIER
from actors.webhook_dispatchers import webhook_dispatcher_names
from actors.webhook_watcher import WEBHOOK_WATCHER
from gateway.runtime.cluster import send_racer_names


def service_actor_names(settings: dict[str, Any]) -> list[str]:
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

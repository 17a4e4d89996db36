"""The ``webhook-watcher`` actor: turns transaction watches and signal webhooks into delivery jobs
(gateway/webhooks/watcher_actor.py)."""

from __future__ import annotations

from typing import Any

from actors.supervision import start_singleton, stop_singleton
from gateway.webhooks.watcher_actor import WebhookWatcherActor

WEBHOOK_WATCHER = "webhook-watcher"


def start_webhook_watcher(settings: dict[str, Any]) -> Any:
    return start_singleton(WEBHOOK_WATCHER, WebhookWatcherActor, settings)


def stop_webhook_watcher() -> None:
    stop_singleton(WEBHOOK_WATCHER)

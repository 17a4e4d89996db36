"""The ``webhook-dispatcher-N`` actors: each claims delivery jobs and posts them
(gateway/webhooks/dispatcher_actor.py)."""

from __future__ import annotations

from typing import Any

from actors.supervision import start_singleton, stop_actors
from gateway.webhooks.dispatcher_actor import WebhookDispatcherActor


def webhook_dispatcher_names(count: int) -> list[str]:
    return [f"webhook-dispatcher-{n}" for n in range(count)]


def start_webhook_dispatchers(settings: dict[str, Any], count: int) -> list[Any]:
    """The pool of webhook dispatchers: each one named and restarted after a crash like a singleton."""
    names = webhook_dispatcher_names(count)
    return [start_singleton(name, WebhookDispatcherActor, settings, name, member=n) for n, name in enumerate(names)]


def stop_webhook_dispatchers(count: int) -> None:
    stop_actors(webhook_dispatcher_names(count))

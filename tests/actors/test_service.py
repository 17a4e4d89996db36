"""actors/service.py's one list of actor groups, as gateway/runtime/stack.py starts it: the groups the
replicas call (the racers, the shards) before Serve deploys, the others after it answers, each group's
report under its part, every name stopped in the list's order. Each module's start function is recorded
here instead of run: no Ray."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

import actors.service as service
from gateway.app.settings import Settings
from gateway.runtime.stack import Stack
from tests.support import service_key_settings

STARTS = (
    "start_grpc_streams",
    "start_webhook_dispatchers",
    "start_webhook_watcher",
    "start_signal_classifier",
    "start_send_reconciler",
    "start_send_racers",
    "start_account_shards",
    "start_deposit_watcher",
    "start_upstream_health",
)


@pytest.fixture
def started(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    calls: list[str] = []
    for name in STARTS:
        monkeypatch.setattr(service, name, lambda *args, _name=name, **kwargs: calls.append(_name) or [])
    return calls


def _run(stack: Stack, resolved: Settings) -> None:
    stack._start_actors(resolved, before_serve=True)
    stack.report("Serve", "deployed")
    stack._start_actors(resolved, before_serve=False)


def test_the_stack_starts_the_groups_around_serve_and_reports_each(tmp_path: Path, started: list[str]) -> None:
    configured = Settings(**service_key_settings(tmp_path), home=tmp_path)  # the embedded devnode
    resolved = configured.model_copy(update={"account_shards": 2, "send_racers": 2, "webhook_dispatchers": 3})
    reported: list[tuple[str, str]] = []
    _run(Stack(configured, report=lambda part, detail: reported.append((part, detail))), resolved)

    assert started == [
        "start_upstream_health",  # first: every replica and actor reads the pool's health from it
        "start_account_shards",
        "start_send_racers",
        "start_deposit_watcher",
        "start_send_reconciler",
        "start_signal_classifier",
        "start_webhook_watcher",
        "start_webhook_dispatchers",
    ]  # and no gRPC: the configured settings name no geyser endpoint
    legs = ", ".join(resolved.send_legs)
    assert reported == [
        ("nodes", "owner of the pool's health: 1 node(s), primary"),
        ("limits", "2 account-shard actor(s) owning rate and concurrency"),
        ("Serve", "deployed"),
        ("deposits", "watcher actor following the deposit wallet's USDC account"),
        ("sending", f"2 send-racer actor(s) on {legs}; reconciler actor"),
        ("signals", f"classifier actor on {', '.join(resolved.signal_programs)}"),
        ("webhooks", "watcher actor writing transaction and signal delivery jobs"),
        ("webhooks", "3 dispatcher actor(s) delivering them"),
        ("webhooks", reported[8][1]),
        ("gRPC", "off: no node serving geyser (upstreams, upstream_grpc_url)"),
    ]
    # the receivers are told from the settings as configured: on by default with the embedded devnode
    assert reported[8][1].startswith("local receivers accepted") and "embedded devnode" in reported[8][1]


def test_no_shard_is_started_or_reported_without_shards(tmp_path: Path, started: list[str]) -> None:
    settings = Settings(**service_key_settings(tmp_path), home=tmp_path, account_shards=0)
    reported: list[str] = []
    _run(Stack(settings, report=lambda part, detail: reported.append(part)), settings)
    assert "limits" not in reported


def test_every_name_is_stopped_in_the_lists_order() -> None:
    counts: dict[str, Any] = {"grpc_servers": 2, "webhook_dispatchers": 2, "send_racers": 2, "account_shards": 2}
    assert service.service_actor_names(counts) == [
        "grpc-stream-0",
        "grpc-stream-1",
        "webhook-dispatcher-0",
        "webhook-dispatcher-1",
        "webhook-watcher",
        "signal-classifier",
        "send-reconciler",
        "send-racer-0",
        "send-racer-1",
        "account-shard-0",
        "account-shard-1",
        "deposit-watcher",
        "upstream-health",  # last: every other process reads the pool's health from it until it stops
    ]
    assert [name for group in service.GROUPS for name in group.names(counts)] == service.service_actor_names(counts)

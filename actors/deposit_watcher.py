"""The ``deposit-watcher`` actor: follows the deposit address and credits each deposit once
(gateway/credits/watcher_actor.py)."""

from __future__ import annotations

from typing import Any

from actors.supervision import start_singleton, stop_singleton
from gateway.credits.watcher_actor import DEFAULT_INTERVAL_S, DepositWatcherActor

DEPOSIT_WATCHER = "deposit-watcher"


def start_deposit_watcher(settings: dict[str, Any], interval_s: float = DEFAULT_INTERVAL_S) -> Any:
    return start_singleton(DEPOSIT_WATCHER, DepositWatcherActor, settings, interval_s)


def stop_deposit_watcher() -> None:
    stop_singleton(DEPOSIT_WATCHER)

"""The ``send-reconciler`` actor: settles held sends whose race ended without a proven outcome
(gateway/sending/reconciler_actor.py)."""

from __future__ import annotations

from typing import Any

from actors.supervision import start_singleton
from gateway.sending.reconciler_actor import SendReconcilerActor

SEND_RECONCILER = "send-reconciler"


def start_send_reconciler(settings: dict[str, Any]) -> Any:
    return start_singleton(SEND_RECONCILER, SendReconcilerActor, settings)

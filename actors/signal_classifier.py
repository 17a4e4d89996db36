"""The ``signal-classifier`` actor: turns confirmed blocks of the watched programs into signal events
(gateway/signals/classifier_actor.py)."""

from __future__ import annotations

from typing import Any

from actors.supervision import start_singleton, stop_singleton
from gateway.signals.classifier_actor import SignalClassifierActor

SIGNAL_CLASSIFIER = "signal-classifier"


def start_signal_classifier(settings: dict[str, Any]) -> Any:
    return start_singleton(SIGNAL_CLASSIFIER, SignalClassifierActor, settings)


def stop_signal_classifier() -> None:
    stop_singleton(SIGNAL_CLASSIFIER)

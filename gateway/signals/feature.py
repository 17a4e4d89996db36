"""Signals, as the one list (``gateway/app/features.py``) takes them: ``GET /signals/recent`` and its part of
the OpenAPI document, and the classifier's settings."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from starlette.routing import BaseRoute

from gateway.auth.stage import Gates
from gateway.pipeline.declaration import Feature
from gateway.signals.api_doc import API_DOC
from gateway.signals.routes import signal_routes
from gateway.signals.settings import SignalSettings
from gateway.signals.store import SignalLog


class SignalsHost(Gates, Protocol):
    @property
    def signal_log(self) -> SignalLog | None:
        """The log, once the replica has started with Redis."""


def _routes(host: SignalsHost) -> Sequence[BaseRoute]:
    return signal_routes(host, lambda: host.signal_log)


FEATURE: Feature[SignalsHost] = Feature("signals", routes=_routes, api=(API_DOC,), settings=SignalSettings)

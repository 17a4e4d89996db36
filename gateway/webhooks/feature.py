"""Webhooks, as the one list (``gateway/app/features.py``) takes them: ``/webhooks`` and its part of the
OpenAPI document, and the webhook settings."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from starlette.routing import BaseRoute

from gateway.access.guard import AccessGuard
from gateway.auth.stage import Gates
from gateway.pipeline.declaration import Feature
from gateway.webhooks.api_doc import API_DOC
from gateway.webhooks.management import WebhookEndpoints
from gateway.webhooks.routes import webhook_routes
from gateway.webhooks.settings import WebhookSettings


class WebhooksHost(Gates, Protocol):
    @property
    def webhooks(self) -> WebhookEndpoints: ...

    @property
    def access(self) -> AccessGuard: ...


def _routes(host: WebhooksHost) -> Sequence[BaseRoute]:
    return webhook_routes(host, host.webhooks, host.access)


FEATURE: Feature[WebhooksHost] = Feature("webhooks", routes=_routes, api=(API_DOC,), settings=WebhookSettings)

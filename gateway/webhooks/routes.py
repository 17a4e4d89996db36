"""HTTP routes of the webhook management (``/webhooks``), mounted beside the JSON-RPC routes.

Each runs ``error_boundary``, the per-address limit of the ``webhooks`` group, and the auth stage
(any credential mode, an account needed: 402 with the payment terms without one), then its endpoint
(:class:`gateway.webhooks.management.WebhookEndpoints`, built by :class:`gateway.app.GatewayApp`).
Not billed, so no credit headers. ``{id}`` is any path segment: the endpoint answers 404 for one
that is not an id, after authentication, as for any id the caller does not own.
"""

from __future__ import annotations

from starlette.routing import BaseRoute

from gateway.auth.stage import Gates
from gateway.pipeline import Stage
from gateway.pipeline_http import mount
from gateway.webhooks.management import WebhookEndpoints


def webhook_routes(gates: Gates, endpoints: WebhookEndpoints) -> list[BaseRoute]:
    stages: list[Stage] = [gates.limit("webhooks"), gates.account_stage(require_account=True)]
    return [
        mount("/webhooks", "POST", stages, endpoints.create),
        mount("/webhooks", "GET", stages, endpoints.listing),
        mount("/webhooks/{id}", "DELETE", stages, endpoints.delete),
        mount("/webhooks/{id}/rotate-secret", "POST", stages, endpoints.rotate_secret),
        mount("/webhooks/{id}/replay", "POST", stages, endpoints.replay),
        mount("/webhooks/{id}/resume", "POST", stages, endpoints.resume),
        mount("/webhooks/{id}/pause", "POST", stages, endpoints.pause),
        mount("/webhooks/{id}/deliveries", "GET", stages, endpoints.deliveries),
    ]

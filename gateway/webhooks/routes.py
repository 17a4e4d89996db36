"""HTTP routes of the webhook management (``/webhooks``), mounted beside the JSON-RPC routes.

Each runs ``error_boundary``, the per-address limit of the ``webhooks`` group, the auth stage (any
credential mode, an account needed: 402 with the payment terms without one), the access rules' webhook
action (:class:`gateway.access.stage.WebhookAction`: a key or session of an account with rules takes only
the actions they list), then its endpoint (:class:`gateway.webhooks.management.WebhookEndpoints`, built
by :class:`gateway.app.replica.GatewayApp`). Not billed, so no credit headers. ``{id}`` is any path segment: the
endpoint answers 404 for one that is not an id, after authentication, as for any id the caller does not own.
"""

from __future__ import annotations

from starlette.routing import BaseRoute

from gateway.access.guard import AccessGuard
from gateway.access.stage import WebhookAction
from gateway.auth.stage import Gates
from gateway.pipeline.http import mount
from gateway.pipeline.stages import Handler, Stage
from gateway.webhooks.management import WebhookEndpoints


def webhook_routes(gates: Gates, endpoints: WebhookEndpoints, guard: AccessGuard) -> list[BaseRoute]:
    def stages(action: str) -> list[Stage]:
        return [gates.limit("webhooks"), gates.account_stage(require_account=True), WebhookAction(guard, action)]

    routes: list[tuple[str, str, str, Handler]] = [
        ("/webhooks", "POST", "create", endpoints.create),
        ("/webhooks", "GET", "list", endpoints.listing),
        ("/webhooks/{id}", "DELETE", "delete", endpoints.delete),
        ("/webhooks/{id}/rotate-secret", "POST", "rotate-secret", endpoints.rotate_secret),
        ("/webhooks/{id}/replay", "POST", "replay", endpoints.replay),
        ("/webhooks/{id}/resume", "POST", "resume", endpoints.resume),
        ("/webhooks/{id}/pause", "POST", "pause", endpoints.pause),
        ("/webhooks/{id}/deliveries", "GET", "deliveries", endpoints.deliveries),
    ]
    return [mount(path, method, stages(action), endpoint) for path, method, action, endpoint in routes]

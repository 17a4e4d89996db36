"""``/webhooks`` and its per-id routes in the OpenAPI document (built with :mod:`gateway.core.api_doc`;
docs/api.md, Webhooks): any credential, an account needed; a key or session of an account with access
rules only for the actions their ``webhooks`` list names (403 ACCESS_DENIED otherwise)."""

from __future__ import annotations

from typing import Any

from gateway.core.api_doc import ApiDoc, errors, json_answer, operation, ref
from gateway.webhooks.management import DEFAULT_DELIVERIES, MAX_DELIVERIES
from gateway.webhooks.models import (
    EmptyRequest,
    WebhookCreated,
    WebhookDeleted,
    WebhookDeliveryPage,
    WebhookList,
    WebhookPaused,
    WebhookReplayed,
    WebhookRequest,
    WebhookResumed,
    WebhookSecret,
)
from gateway.webhooks.rules import MAX_WEBHOOKS_PER_ACCOUNT

_PER_WEBHOOK = (
    "rotateWebhookSecret",
    "replayWebhook",
    "resumeWebhook",
    "pauseWebhook",
    "webhookDeliveries",
    "deleteWebhook",
)


def paths() -> dict[str, Any]:
    refusals = {**errors(400, 401, 403, 405, 413, 429, 500, 503), **errors(402, rpc=(402,))}
    per_id = {**refusals, "404": json_answer(ref("ErrorBody"), "no such webhook of this account: NOT_FOUND")}
    id_param = [{"name": "id", "in": "path", "required": True, "schema": {"type": "integer", "minimum": 1}}]

    def per(operation_id: str, summary: str, answer: str, body: str | None = "EmptyRequest") -> dict[str, Any]:
        ok = json_answer(ref(answer), "done")
        op = operation(summary, ok, per_id, body=body, params=id_param, secured=True, tag="Webhooks")
        return {"operationId": operation_id, **op}

    created = json_answer(ref("WebhookCreated"), "created")
    created["links"] = {  # what to call on the webhook just created (schemathesis follows them too)
        name: {"operationId": name, "parameters": {"id": "$response.body#/id"}} for name in _PER_WEBHOOK
    }

    return {
        "/webhooks": {
            "post": operation(
                f"Subscribe a URL to events (at most {MAX_WEBHOOKS_PER_ACCOUNT} per account; a positive balance "
                "needed: 402 -32010 without); the answer carries the signing secret, shown this once",
                created,
                refusals,
                body="WebhookRequest",
                secured=True,
                tag="Webhooks",
                ok_status=201,
            ),
            "get": operation(
                "The account's webhooks, newest first, with delivery counts (never secrets)",
                json_answer(ref("WebhookList"), "the webhooks"),
                refusals,
                secured=True,
                tag="Webhooks",
            ),
        },
        "/webhooks/{id}/rotate-secret": {
            "post": per("rotateWebhookSecret", "A new signing secret, used from the next delivery", "WebhookSecret")
        },
        "/webhooks/{id}/replay": {
            "post": per("replayWebhook", "Retry every dead delivery from its first attempt", "WebhookReplayed")
        },
        "/webhooks/{id}/resume": {
            "post": per("resumeWebhook", "Resume a paused webhook's deliveries", "WebhookResumed")
        },
        "/webhooks/{id}/pause": {
            "post": per(
                "pauseWebhook",
                "Pause a webhook: its queued deliveries wait for a resume (beyond the interface)",
                "WebhookPaused",
            )
        },
        "/webhooks/{id}/deliveries": {"get": _deliveries_operation(per_id, id_param)},
        "/webhooks/{id}": {
            "delete": per(
                "deleteWebhook", "Delete a webhook; its waiting deliveries are cancelled", "WebhookDeleted", None
            )
        },
    }


def _deliveries_operation(per_id: dict[str, Any], id_param: list[dict[str, Any]]) -> dict[str, Any]:
    """``GET /webhooks/{id}/deliveries`` (docs/api.md, Webhooks; beyond the interface)."""
    params = [
        *id_param,
        {
            "name": "limit",
            "in": "query",
            "schema": {"type": "integer", "minimum": 1, "maximum": MAX_DELIVERIES, "default": DEFAULT_DELIVERIES},
        },
        {"name": "cursor", "in": "query", "description": "a page's next_cursor", "schema": {"type": "string"}},
    ]
    ok = json_answer(ref("WebhookDeliveryPage"), "the webhook's events, newest first")
    summary = "A webhook's recent deliveries with the receiver's last answer (beyond the interface)"
    op = operation(summary, ok, per_id, body=None, params=params, secured=True, tag="Webhooks")
    return {"operationId": "webhookDeliveries", **op}


API_DOC = ApiDoc(
    paths,
    (
        WebhookRequest,
        EmptyRequest,
        WebhookCreated,
        WebhookList,
        WebhookSecret,
        WebhookDeleted,
        WebhookReplayed,
        WebhookResumed,
        WebhookPaused,
        WebhookDeliveryPage,
    ),
)

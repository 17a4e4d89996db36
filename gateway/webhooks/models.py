"""The bodies of ``/webhooks`` as pydantic models: request parsing (:mod:`gateway.webhooks.validation`) and the
OpenAPI document's schemas (docs/api.md, Webhooks)."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, WithJsonSchema

from gateway.core.patterns import BASE58_KEY
from gateway.signals.rules import KINDS
from gateway.webhooks.events import LIFECYCLE_EVENTS
from gateway.webhooks.rules import FILTER_TYPES

#: The longest webhook URL accepted.
MAX_WEBHOOK_URL_LENGTH = 2048


def _documented(schema: dict[str, Any]) -> Any:
    """A string accepted as any string by the model, documented with ``schema``: the values are checked
    by :mod:`gateway.webhooks.management`, whose refusals name the field and the value."""
    return WithJsonSchema({"type": "string", **schema})


class WebhookRequest(BaseModel):
    """``POST /webhooks``: the creation fields (docs/api.md, Webhooks)."""

    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={
            "examples": [
                {
                    "url": "https://hooks.example.com/solana",
                    "filter_type": "lifecycle",
                    "lifecycle_events": ["api_key.rotated"],
                }
            ]
        },
    )

    url: Annotated[str, _documented({"pattern": "^https?://", "maxLength": MAX_WEBHOOK_URL_LENGTH})] = Field(
        description="https:// URL deliveries are posted to (http:// and private hosts: development setting only)"
    )
    filter_type: Annotated[str, _documented({"enum": list(FILTER_TYPES)})]
    filter_value: Annotated[str, _documented({"pattern": BASE58_KEY})] | None = Field(
        None, description="account, program: the address watched (required); my_account: your own key or absent"
    )
    lifecycle_events: list[Annotated[str, _documented({"enum": list(LIFECYCLE_EVENTS)})]] | None = Field(
        None, description="lifecycle: the events delivered (required, at least one)"
    )
    signal_events: list[Annotated[str, _documented({"enum": list(KINDS)})]] | None = Field(
        None, description="signal: the kinds delivered; absent or empty: every kind"
    )


class EmptyRequest(BaseModel):
    """``{}`` (an empty body is accepted too)."""

    model_config = ConfigDict(extra="forbid")


class WebhookDeliveries(BaseModel):
    pending: int = Field(description="waiting for their first or next attempt, or being delivered")
    delivered: int
    dead: int = Field(description="every attempt failed; POST /webhooks/{id}/replay retries them")


class WebhookLastDelivery(BaseModel):
    event_id: str = Field(description="evt_{webhook_id}_{job_id}, the X-Webhook-Event-Id of its deliveries")
    event_type: str
    status: Literal["pending", "delivering", "delivered", "dead", "cancelled"]
    attempts: int
    http_status: int | None = Field(description="the receiver's last HTTP status")
    error: str | None = Field(description="why the last attempt failed")
    created_at: str = Field(description="ISO 8601 UTC: when the event happened")
    delivered_at: str | None = Field(description="ISO 8601 UTC")


class Webhook(BaseModel):
    """A subscription as listed (never with its secret)."""

    id: int
    url: str
    filter_type: Annotated[str, _documented({"enum": list(FILTER_TYPES)})]
    filter_value: str | None
    lifecycle_events: list[str]
    signal_events: list[str]
    status: Literal["active", "paused"]
    paused_reason: str | None = Field(
        description="why deliveries are paused: a delivery could not be paid, or too many in a row ended dead "
        "(POST /webhooks/{id}/resume)"
    )
    created_at: str = Field(description="ISO 8601 UTC")
    secret_rotated_at: str | None = Field(description="ISO 8601 UTC")
    deliveries: WebhookDeliveries
    last_delivery: WebhookLastDelivery | None = Field(description="the newest event attempted, or null")


class WebhookCreated(Webhook):
    secret: str = Field(description="the signing secret: shown now and at rotation only")


class WebhookList(BaseModel):
    webhooks: list[Webhook] = Field(description="newest first")
    max_webhooks: int = Field(description="how many subscriptions an account may hold")
    max_watched_addresses: int = Field(
        description="how many distinct addresses an account's account, program and my_account webhooks may watch"
    )


class WebhookSecret(BaseModel):
    secret: str


class WebhookDeleted(BaseModel):
    ok: bool
    id: int
    cancelled_jobs: int = Field(description="deliveries that will not be made")


class WebhookReplayed(BaseModel):
    ok: bool
    id: int
    replayed: int = Field(description="dead deliveries moved back to pending")


class WebhookResumed(BaseModel):
    ok: bool
    id: int
    resumed: bool = Field(description="false when it was not paused")
    status: Literal["active"]


class WebhookPaused(BaseModel):
    ok: bool
    id: int
    paused: bool = Field(description="false when it was paused already (its reason kept)")
    status: Literal["paused"]


class WebhookDelivery(BaseModel):
    event_id: str = Field(description="evt_{webhook_id}_{job_id}, the X-Webhook-Event-Id of its deliveries")
    event_type: str
    status: Literal["pending", "delivering", "delivered", "dead", "cancelled"]
    attempts: int = Field(description="attempts made so far")
    http_status: int | None = Field(description="the receiver's HTTP status at the last attempt (null: no answer)")
    response_excerpt: str | None = Field(description="the first 512 bytes of that answer's body, as text")
    error: str | None = Field(description="why the last attempt failed")
    created_at: str = Field(description="ISO 8601 UTC: when the event happened")
    last_attempt_at: str | None = Field(description="ISO 8601 UTC: when the last attempt ended; null before one")
    next_attempt_at: str | None = Field(description="ISO 8601 UTC, pending only: when the next attempt is due")
    delivered_at: str | None = Field(description="ISO 8601 UTC")


class WebhookDeliveryPage(BaseModel):
    id: int = Field(description="the webhook")
    entries: list[WebhookDelivery] = Field(description="newest first")
    next_cursor: str | None = Field(description="the cursor of the next page; null on the last one")

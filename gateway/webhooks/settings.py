"""Webhooks' settings: the dispatchers and their shares of delivery slots, per-account limits, attempt
timeouts and leases, and how long finished jobs are kept."""

from __future__ import annotations

from typing import Self

from pydantic import Field, model_validator

from gateway.base.config import ServiceSettings
from gateway.webhooks.rules import MAX_WATCHED_ADDRESSES


class WebhookSettings(ServiceSettings):
    """Webhook delivery and management."""

    webhook_allow_private: bool = Field(
        False,
        description="Development only: webhook URLs may be http:// and name loopback or private hosts "
        "(localhost, 10.x, 192.168.x...). Off: https:// to public addresses only. Unset, gateway up turns it on "
        "with the embedded devnode (no upstream_rpc_url) and leaves it off with a real node; set, it wins.",
    )
    webhook_dispatchers: int = Field(
        1, ge=0, le=64, description="Webhook dispatcher actors started by gateway up (0: jobs wait in PostgreSQL)."
    )
    webhook_concurrency: int = Field(64, ge=1, le=10_000, description="Deliveries in flight at once per dispatcher.")
    webhook_per_subscription: int = Field(
        16,
        ge=1,
        le=10_000,
        description="Deliveries in flight at once to one subscription, over all dispatchers: a slow receiver "
        "cannot take every slot.",
    )
    webhook_per_account: int = Field(
        16,
        ge=1,
        le=10_000,
        description="Deliveries in flight at once to one account's subscriptions together, over all dispatchers: "
        "one account's slow receivers cannot take the slots other accounts' deliveries need.",
    )
    webhook_watched_addresses_per_account: int = Field(
        10,
        ge=1,
        le=MAX_WATCHED_ADDRESSES,
        description="Distinct addresses one account's transaction watches (account, program, my_account webhooks) "
        f"may follow, within the {MAX_WATCHED_ADDRESSES:,} the watcher follows over every account; a creation "
        "past it is refused 400.",
    )
    webhook_actions_per_minute: int = Field(
        10,
        ge=1,
        le=10_000,
        description="Replays and resumes of webhooks one account may make a minute (429 past them): each makes "
        "deliveries due again, for free.",
    )
    webhook_pause_after_dead: int = Field(
        10,
        ge=0,
        le=10_000,
        description="A webhook whose deliveries end dead this many times in a row (none delivered in between) is "
        "paused until POST /webhooks/{id}/resume (0: never).",
    )
    webhook_delivery_timeout_s: float = Field(
        10.0, gt=0, le=120, description="Time limit of one delivery attempt (connect, post, the answer's start)."
    )
    webhook_lease_s: float = Field(
        60.0,
        gt=0,
        le=3600,
        description="How long a dispatcher holds a claimed delivery; a dead dispatcher's are claimed again "
        "after it. At least twice webhook_delivery_timeout_s.",
    )
    webhook_retention_days: float = Field(
        30.0,
        gt=0,
        le=3650,
        description="Delivered, dead and cancelled webhook jobs older than this are deleted (hourly); a dead job "
        "can be replayed until then.",
    )
    webhook_paused_retention_days: float = Field(
        7.0,
        gt=0,
        le=3650,
        description="The waiting jobs of a webhook paused longer than this are cancelled (hourly; a charged one "
        "refunded): nobody delivers them, and the queue would keep them forever.",
    )

    @model_validator(mode="after")
    def _check_webhook_lease(self) -> Self:
        # A claim must outlive its attempt, or another dispatcher could claim a delivery still at its receiver.
        if self.webhook_lease_s < 2 * self.webhook_delivery_timeout_s:
            raise ValueError(
                f"webhook_lease_s ({self.webhook_lease_s:g}) must be at least twice webhook_delivery_timeout_s "
                f"({self.webhook_delivery_timeout_s:g})"
            )
        return self

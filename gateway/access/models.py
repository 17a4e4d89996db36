"""The bodies of the access rules' routes as pydantic models, for the OpenAPI document (gateway/transports/openapi.py).
The handlers build their answers as plain dicts; tests/integration/test_openapi.py checks them against these."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from gateway.access.rules import MAX_ADDRESSES, MAX_METHODS, MAX_ORIGINS, MAX_RATE, MAX_WEBHOOK_ACTIONS
from gateway.access.spend_cap import MAX_CAP
from gateway.auth.models import SpendCap

#: The webhook management actions (gateway.access.rules.WEBHOOK_ACTIONS), one per ``/webhooks`` route.
WebhookActionName = Literal["create", "list", "delete", "pause", "resume", "replay", "rotate-secret", "deliveries"]


class AccessRulesRequest(BaseModel):
    """The account's whole rules (each list replaces the last; absent or empty: no rule of its kind)."""

    model_config = ConfigDict(extra="forbid")

    origins: list[str] = Field(
        default=[],
        max_length=MAX_ORIGINS,
        description="exact origins (`https://app.example.com`, a port if not the scheme's) or a wildcard "
        "subdomain (`https://*.example.com`)",
    )
    addresses: list[str] = Field(
        default=[], max_length=MAX_ADDRESSES, description="client IPv4/IPv6 addresses and CIDR ranges"
    )
    methods: list[str] = Field(
        default=[],
        max_length=MAX_METHODS,
        description="JSON-RPC method names and method classes (READ_CHEAP, ..., SUBSCRIPTION for the WebSocket "
        "subscriptions, GRPC for the gRPC stream)",
    )
    rate: int | None = Field(
        default=None,
        ge=1,
        le=MAX_RATE,
        description="requests per second the API key and session tokens make together, over every replica "
        "(below the account's own to matter); null: none",
    )
    webhooks: list[WebhookActionName] = Field(
        default=[],
        max_length=MAX_WEBHOOK_ACTIONS,
        description="the webhook management actions the API key and session tokens may take while the account "
        "has any rule (none by default; with no rule at all, every action); the wallet's own proof is never bound",
    )


class AccessRulesAnswer(BaseModel):
    ok: Literal[True]
    pubkey: str
    origins: list[str]
    addresses: list[str]
    methods: list[str]
    rate: int | None
    webhooks: list[WebhookActionName]
    binds: list[Literal["api_key", "session"]] = Field(description="the credentials the rules bind")


class SpendCapRequest(BaseModel):
    """The account's daily spend cap (null or absent: none)."""

    model_config = ConfigDict(extra="forbid")

    daily_credits: int | None = Field(default=None, ge=1, le=MAX_CAP)


class SpendCapAnswer(SpendCap):
    ok: Literal[True]
    pubkey: str

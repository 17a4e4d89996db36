"""Sending's settings: the legs a transaction is broadcast on, the racer actors, the block engine and
tip floor, and how long sends are kept."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, field_validator

from gateway.base.config import ServiceSettings, url_with_scheme

SendLeg = Literal["local_rpc", "jito", "tpu_quic"]
SEND_LEGS: tuple[SendLeg, ...] = ("local_rpc", "jito", "tpu_quic")


class SendingSettings(ServiceSettings):
    """Multi-path sending and the bundle relay."""

    send_legs: list[SendLeg] = Field(
        default_factory=lambda: list(SEND_LEGS),
        min_length=1,
        description="The legs sendAndConfirm broadcasts on at once.",
    )
    send_racers: int = Field(
        2, ge=0, le=64, description="Send-racer actors started by gateway up (0: races run in the replicas)."
    )
    block_engine_url: str | None = Field(
        None,
        description="Block engine JSON-RPC base (ends in /api/v1) for bundles and the relay send leg; "
        "empty: the devnode's local block engine in the embedded default, else no relay.",
    )
    tip_floor_url: str | None = Field(
        None,
        description="Where the tip floor is read (mainnet Jito serves it apart from the block engine); "
        "empty: {block_engine_url}/bundles/tip_floor.",
    )
    send_unproven_release_s: float = Field(
        600.0,
        ge=10,
        le=30 * 86_400,
        description="A pending sendAndConfirm the node can prove neither landed nor lost (its blocks since the hold "
        "purged: a limited ledger, a restart) is released this long after its hold, nothing charged, its "
        "settlement marked unproven.",
    )
    send_retention_days: float = Field(
        30.0,
        ge=1,
        le=3650,
        description="sendAndConfirm records settled longer ago than this are deleted (hourly, by the send "
        "reconciler); getSendStatus answers null for them. Pending sends are never deleted.",
    )

    @field_validator("block_engine_url", "tip_floor_url")
    @classmethod
    def _check_engine_url(cls, value: str | None) -> str | None:
        return url_with_scheme(value, ("http", "https"), "block engine URL")

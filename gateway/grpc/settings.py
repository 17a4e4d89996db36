"""The gRPC stream's settings: its port and TLS, what each account and address may open and hold,
billing, the replay log, and the upstream geyser's filter budget and token. (Whether the stream is
served at all, ``grpc_servers`` and ``upstream_grpc_url``, is shared: the app reports it.)"""

from __future__ import annotations

from pathlib import Path
from typing import Self

from pydantic import Field, model_validator

from gateway.base.config import Port, ServiceSettings


class GrpcSettings(ServiceSettings):
    """The gRPC stream server's own settings."""

    grpc_port: Port = Field(10000, description="gRPC stream port (Yellowstone's geyser.Geyser service).")
    grpc_tls_cert: Path | None = Field(
        None, description="PEM certificate chain of the gRPC port; with grpc_tls_key it serves TLS, else plaintext."
    )
    grpc_tls_key: Path | None = Field(None, description="PEM private key of grpc_tls_cert.")
    grpc_allow_plaintext_on_network: bool = Field(
        False,
        description="Serve the gRPC stream without TLS on a routable host (API keys in clear on the network): "
        "gateway up refuses to unless this is set (docs/operations.md, Network exposure).",
    )
    grpc_billing_interval_s: float = Field(
        60.0,
        gt=0,
        le=3600,
        description="An open Subscribe stream is billed again at the start of each interval after its first.",
    )
    grpc_max_streams_per_account: int = Field(
        10, ge=1, le=10_000, description="Open Subscribe streams per account over every gRPC server process."
    )
    grpc_max_streams_per_address: int = Field(
        40,
        ge=1,
        le=100_000,
        description="Open Subscribe streams from one client address over every gRPC server process (any accounts).",
    )
    grpc_max_stream_opens_per_minute: int = Field(
        30, ge=1, le=100_000, description="Subscribe streams one account may open per minute, over every gRPC server."
    )
    grpc_max_queued: int = Field(
        10_000,
        ge=10,
        le=10_000_000,
        description="Updates waiting for one stream (and at most 64 MiB) before a client too slow to read is cut off.",
    )
    grpc_ping_interval_s: float = Field(
        15.0, gt=0, le=300, description="A stream with nothing to send for this long gets a ping update."
    )
    grpc_replay_slots: int = Field(
        150,
        ge=0,
        le=10_000,
        description="The replay log of each gRPC server process: the node's whole feed over the newest this many "
        "slots, which a Subscribe request's from_slot replays (docs/api.md, gRPC). 0: no log, from_slot is "
        "UNIMPLEMENTED and the upstream subscription asks only for the streams' filters.",
    )
    grpc_replay_max_bytes: int = Field(
        256 * 2**20,
        ge=2**20,
        le=64 * 2**30,
        description="The replay log's bytes of updates (as the node sent them), whatever grpc_replay_slots says: "
        "the oldest slots go first.",
    )
    grpc_replay_max_updates: int = Field(
        500_000,
        ge=1_000,
        le=100_000_000,
        description="The replay log's updates, whatever grpc_replay_slots says (each costs about 40 bytes beyond its "
        "size): the oldest slots go first.",
    )
    grpc_account_filter_share: float = Field(
        0.25,
        gt=0,
        le=1,
        description="The part of upstream_grpc_max_filters one account's streams on a gRPC server process may use "
        "together, per kind (0.25: 16 of 64); a stream that would exceed it is refused RESOURCE_EXHAUSTED.",
    )
    upstream_grpc_max_filters: int = Field(
        64,
        ge=1,
        le=100_000,
        description="Filters of one kind (accounts, transactions) the node accepts in one Subscribe request: the "
        "budget of each gRPC server process's one upstream subscription (the devnode accepts 64; Yellowstone sets "
        "no limit unless its config does: set it to the node's).",
    )
    upstream_grpc_token: str | None = Field(None, repr=False, description="x-token sent to upstream_grpc_url.")

    @model_validator(mode="after")
    def _check_grpc_tls(self) -> Self:
        if (self.grpc_tls_cert is None) != (self.grpc_tls_key is None):
            raise ValueError("grpc_tls_cert and grpc_tls_key go together: set both (TLS) or neither (plaintext)")
        return self

"""JSON-RPC reads' settings: the replica's response cache."""

from __future__ import annotations

from pydantic import Field

from gateway.base.config import ServiceSettings


class RpcSettings(ServiceSettings):
    """The response cache of reads."""

    response_cache: bool = Field(
        True, description="Cache node answers that can no longer change (finalized reads), per replica and in Redis."
    )
    response_cache_entries: int = Field(
        10_000, ge=1, le=10_000_000, description="Entries of each replica's response cache (also bounded to 64 MiB)."
    )
    response_cache_unfinalized_ttl_ms: int = Field(
        0,
        ge=0,
        le=60_000,
        description="How long a replica keeps an answer that may still change (processed, confirmed); 0: never.",
    )

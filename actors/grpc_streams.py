"""The ``grpc-stream-N`` actors: each a ``grpc.aio`` server holding its open streams and one upstream
subscription shared by them (gateway/grpc/stream_actor.py, docs/architecture.md's gRPC section)."""

from __future__ import annotations

from typing import Any

from actors.shard_client import RayShards
from actors.supervision import start_singleton
from gateway.grpc.stream_actor import GrpcStreamActor


def grpc_stream_names(count: int) -> list[str]:
    return [f"grpc-stream-{n}" for n in range(count)]


def start_grpc_streams(settings: dict[str, Any], count: int, timeout_s: float = 60.0) -> list[dict[str, Any]]:
    """The gRPC stream server actors (each named and restarted like a singleton); returns their status
    once every one listens, or raises why one could not."""
    import ray

    account_shards = int(settings.get("account_shards", 0))
    shards = RayShards(account_shards) if account_shards > 0 else None  # the limits the replicas share
    handles = [start_singleton(name, GrpcStreamActor, settings, name, shards) for name in grpc_stream_names(count)]
    return [ray.get(handle.wait_ready.remote(timeout_s), timeout=timeout_s + 10) for handle in handles]

"""The gRPC stream, as the one list (``gateway/app/features.py``) takes it: its settings, which the replica
reads for ``GET /pricing`` (the stream is served by its own server processes, not the replica)."""

from __future__ import annotations

from gateway.grpc.settings import GrpcSettings
from gateway.pipeline.declaration import Feature

FEATURE: Feature[object] = Feature("grpc", settings=GrpcSettings)

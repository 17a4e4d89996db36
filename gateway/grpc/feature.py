"""The gRPC stream, as the one list (``gateway/features.py``) takes it: its settings, which the replica
reads for ``GET /pricing`` (the stream is served by its own server processes, not the replica)."""

from __future__ import annotations

from gateway.feature import Feature
from gateway.grpc.settings import GrpcSettings

FEATURE: Feature[object] = Feature("grpc", settings=GrpcSettings)

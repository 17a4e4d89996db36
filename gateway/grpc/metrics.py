"""The gRPC stream's metric: open streams of a server process (its service). The node's geyser
subscription's are the kernel's (``gateway/base/metrics.py``, recorded by ``gateway/node/geyser.py``).
"""

from __future__ import annotations

from gateway.base.metrics import gauge

GRPC_STREAMS = gauge("gateway_grpc_streams", "Open gRPC Subscribe streams of this gRPC server process")

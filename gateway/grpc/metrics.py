"""The gRPC stream's metric: open streams of a server process (its service). The node's geyser
subscription's are the kernel's (``gateway/metrics.py``, recorded by ``gateway/node/geyser.py``).

Declared with the kernel's :mod:`gateway.metrics` (which installs every declared metric) and importing
nothing else: every process declares them before it installs its backend, an actor's too
(``gateway/runtime/metrics.py``). Names and labels are docs/operations.md's.
"""

from __future__ import annotations

from gateway.metrics import gauge

GRPC_STREAMS = gauge("gateway_grpc_streams", "Open gRPC Subscribe streams of this gRPC server process")

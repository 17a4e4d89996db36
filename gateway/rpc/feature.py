"""JSON-RPC over the node, as the one list (``gateway/app/features.py``) takes it: the methods the node
answers (their declarations, ``methods.py``) and the response cache's settings. Its routes are the
transports' own (``gateway/transports/http.py``)."""

from __future__ import annotations

from gateway.pipeline.declaration import Feature
from gateway.rpc.methods import SPECS
from gateway.rpc.settings import RpcSettings

FEATURE: Feature[object] = Feature("rpc", methods=SPECS, settings=RpcSettings)

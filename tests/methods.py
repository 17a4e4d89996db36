"""Planning as a replica plans, for the suites that test per-method rules without a GatewayApp."""

from __future__ import annotations

from typing import Any

from gateway.app.features import method_registry
from gateway.core.jsonrpc import RpcItem
from gateway.core.methods import PriceTable, Registry
from gateway.pipeline.declaration import LocalMethod
from gateway.pipeline.stages import Call
from gateway.rpc.planning import plan_item


async def unused_handler(item: RpcItem, call: Call) -> None:
    raise AssertionError("planning tests run no handler")


def registry(*implemented: str) -> Registry[LocalMethod]:
    """Every method declared, with a handler registered for the local methods ``implemented``."""
    methods = method_registry()
    for name in implemented:
        methods.register(name, unused_handler)
    return methods


def planned(method: str, params: Any = None, *implemented: str, prices: PriceTable | None = None) -> RpcItem:
    """An item of ``method`` planned; the local methods ``implemented`` are registered."""
    item = RpcItem(index=0, id=1, method=method, params=params)
    plan_item(item, registry(*implemented), prices or PriceTable.default())
    return item

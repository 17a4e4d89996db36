"""Per-method rules applied before admission: classify, price, check and normalise params.

Pure. Every rejection here is free: it happens before any rate unit or credit is taken. What a method
is, costs and accepts is its declaration in the registry (:class:`gateway.core.methods.Registry`).
"""

from __future__ import annotations

from typing import Any

from gateway.core.errors import (
    RpcCode,
    RpcError,
    invalid_params,
    method_denied,
    method_not_found,
    profile_disabled,
)
from gateway.core.jsonrpc import RpcItem
from gateway.core.methods import MethodClass, MethodSpec, PriceTable, Registry

#: What planning decides from a method's name alone: its declaration and price, or the call's error.
MethodPlan = tuple[MethodSpec[Any], int] | RpcError


def plan_item(item: RpcItem, methods: Registry[Any], prices: PriceTable) -> None:
    """Classify, price and parse ``item`` in place, or set its error."""
    _apply(item, plan_method(item.method, methods, prices))


def plan_items(items: list[RpcItem], methods: Registry[Any], prices: PriceTable) -> None:
    """:func:`plan_item` for each item not answered yet; a method's name is looked up once per call (a
    batch of 100 is mostly a few methods), its params are checked per item."""
    plans: dict[str, MethodPlan] = {}
    for item in items:
        if item.error is not None:
            continue
        plan = plans.get(item.method)
        if plan is None:
            plan = plans[item.method] = plan_method(item.method, methods, prices)
        _apply(item, plan)


def plan_method(method: str, methods: Registry[Any], prices: PriceTable) -> MethodPlan:
    """The declaration and price of ``method``, or the error of every call of it."""
    spec = methods.spec(method)
    error = _class_error(method, spec, methods)
    if error is not None:
        return error
    assert spec is not None
    price = prices.price(spec.cls)
    if price is None:  # fail closed: a call without a price is refused, never forwarded free
        return method_unavailable(method)
    return spec, price


def _apply(item: RpcItem, plan: MethodPlan) -> None:
    if isinstance(plan, RpcError):
        item.error = plan
        return
    spec, price = plan
    error = _parse_params(item, spec)
    if error is not None:
        item.error = error
        return
    item.method_class = spec.cls
    item.price = price


def _class_error(method: str, spec: MethodSpec[Any] | None, methods: Registry[Any]) -> RpcError | None:
    if spec is None:
        return method_not_found(method, methods.closest(method))
    if spec.cls is MethodClass.DENIED:
        return method_denied(method)
    if spec.cls is MethodClass.ARCHIVE_HISTORY:
        return profile_disabled(method, "archive_history")
    if spec.local and not methods.registered(method):  # declared, not registered by the app
        return method_unavailable(method)
    return None


def too_deep(value: Any, limit: int) -> bool:
    """Whether ``value`` nests arrays and objects more than ``limit`` levels deep (no recursion: any
    depth the JSON parser let through is walked safely)."""
    if limit >= 2 and _two_deep(value):  # the common shapes (scalars, a flat config object): one pass
        return False
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        container, depth = stack.pop()
        if depth > limit:
            return True
        children = container.values() if isinstance(container, dict) else container
        stack.extend((child, depth + 1) for child in children if isinstance(child, (dict, list)))
    return False


def _two_deep(value: Any) -> bool:
    """Whether ``value`` (an array or object) nests at most two levels: no container inside a child."""
    for child in value.values() if isinstance(value, dict) else value:
        if isinstance(child, (dict, list)):
            for grandchild in child.values() if isinstance(child, dict) else child:
                if isinstance(grandchild, (dict, list)):
                    return False
    return True


def method_unavailable(method: str) -> RpcError:
    return RpcError(RpcCode.METHOD_NOT_FOUND, f"Method not found: {method} is not available on this gateway yet")


#: How deep params may nest (arrays and objects); a Solana method's are at most a few levels deep, and
#: the gateway re-serializes params (the node's request, cache keys) with orjson, which stops at 255.
MAX_PARAMS_DEPTH = 32


def _parse_params(item: RpcItem, spec: MethodSpec[Any]) -> RpcError | None:
    params = item.params
    if params is None:
        params = item.params = []
    if not isinstance(params, list):
        return invalid_params("params must be an array")
    if params and too_deep(params, MAX_PARAMS_DEPTH):  # no params (getSlot's): one level, never too deep
        return invalid_params(f"params nest deeper than {MAX_PARAMS_DEPTH} levels")
    if spec.parse is None:
        return None
    parsed = spec.parse(params)
    if isinstance(parsed, RpcError):
        return parsed
    item.parsed_value = parsed
    return None

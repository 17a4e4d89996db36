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


def plan_item(item: RpcItem, methods: Registry[Any], prices: PriceTable) -> None:
    """Classify, price and parse ``item`` in place, or set its error."""
    spec = methods.spec(item.method)
    error = _class_error(item.method, spec, methods)
    price = prices.price(spec.cls) if spec is not None else None
    if error is None and price is None:  # fail closed: a call without a price is refused, never forwarded free
        error = method_unavailable(item.method)
    if error is None:
        assert spec is not None
        error = _parse_params(item, spec)
    if error is not None:
        item.error = error
        return
    assert spec is not None and price is not None
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
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        container, depth = stack.pop()
        if depth > limit:
            return True
        children = container.values() if isinstance(container, dict) else container
        stack.extend((child, depth + 1) for child in children if isinstance(child, (dict, list)))
    return False


def method_unavailable(method: str) -> RpcError:
    return RpcError(RpcCode.METHOD_NOT_FOUND, f"Method not found: {method} is not available on this gateway yet")


#: How deep params may nest (arrays and objects); a Solana method's are at most a few levels deep, and
#: the gateway re-serializes params (the node's request, cache keys) with orjson, which stops at 255.
MAX_PARAMS_DEPTH = 32


def _parse_params(item: RpcItem, spec: MethodSpec[Any]) -> RpcError | None:
    if item.params is None:
        item.params = []
    if not isinstance(item.params, list):
        return invalid_params("params must be an array")
    if too_deep(item.params, MAX_PARAMS_DEPTH):
        return invalid_params(f"params nest deeper than {MAX_PARAMS_DEPTH} levels")
    if spec.parse is None:
        return None
    parsed = spec.parse(item.params)
    if isinstance(parsed, RpcError):
        return parsed
    item.parsed_value = parsed
    return None

"""The method registry: each method declared once (name, class, parser, who answers it), and everything
that lists or plans methods reading it: planning, /pricing, the MCP tools."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from gateway.app.features import method_registry
from gateway.app.replica import GatewayApp
from gateway.app.settings import Settings
from gateway.core.errors import RpcError, invalid_params
from gateway.core.jsonrpc import RpcItem
from gateway.core.methods import MethodClass, MethodSpec, PriceTable, Registry
from gateway.mcp.tools import TOOLS
from gateway.pipeline.stages import Call
from gateway.public.documents import pricing_document
from gateway.rpc import methods as node_methods
from gateway.rpc.planning import plan_item
from tests.support import service_key_settings

PRICES = PriceTable.default()


@dataclass(frozen=True)
class Widget:
    size: int


def parse_widget(params: list[Any]) -> Widget | RpcError:
    if len(params) != 1 or not isinstance(params[0], int):
        return invalid_params("params are [<size>]")
    return Widget(params[0])


async def widget_handler(item: RpcItem, call: Call) -> None:
    raise AssertionError("not run here")


WIDGET = MethodSpec("getWidget", MethodClass.READ_MEDIUM, parse_widget, local=True)


def plan(methods: Registry[Any], method: str, params: Any) -> RpcItem:
    item = RpcItem(index=0, id=1, method=method, params=params)
    plan_item(item, methods, PRICES)
    return item


def pricing(methods: Registry[Any]) -> dict[str, Any]:
    return pricing_document(PRICES, 100_000, 3600, methods)["classes"]


def test_a_method_declared_once_is_planned_priced_and_listed() -> None:
    methods: Registry[Any] = Registry(node_methods.SPECS, [WIDGET])
    methods.register("getWidget", widget_handler)
    item = plan(methods, "getWidget", [3])
    assert (item.error, item.method_class, item.price) == (None, MethodClass.READ_MEDIUM, 5)
    assert item.parsed(Widget) == Widget(3)
    refused = plan(methods, "getWidget", ["big"])
    assert refused.error == invalid_params("params are [<size>]") and refused.price == 0
    assert "getWidget" in pricing(methods)["READ_MEDIUM"]["methods"]
    assert pricing(methods)["READ_MEDIUM"]["not_available"] == []
    assert methods.closest("getWidgit") == ("getWidget",)


def test_a_node_method_needs_no_handler() -> None:
    methods: Registry[Any] = Registry([MethodSpec("getGadget", MethodClass.READ_CHEAP)])
    item = plan(methods, "getGadget", None)
    assert (item.error, item.params, item.price) == (None, [], 1)
    with pytest.raises(ValueError, match="getGadget is not declared as a method the gateway answers itself"):
        methods.register("getGadget", widget_handler)


def test_a_local_method_not_registered_is_refused_free() -> None:
    methods: Registry[Any] = Registry(node_methods.SPECS, [WIDGET])
    item = plan(methods, "getWidget", [3])
    assert item.error is not None and item.error.code == -32601
    assert item.error.message == "Method not found: getWidget is not available on this gateway yet"
    assert (item.price, item.method_class, item.parsed_value) == (0, None, None)
    assert methods.not_available == {"getWidget"}
    assert pricing(methods)["READ_MEDIUM"]["not_available"] == ["getWidget"]


def test_a_duplicate_declaration_is_refused_at_start() -> None:
    with pytest.raises(ValueError, match="method getSlot is declared twice"):
        Registry(node_methods.SPECS, [MethodSpec("getSlot", MethodClass.READ_MEDIUM)])
    methods: Registry[Any] = Registry([WIDGET])
    methods.register("getWidget", widget_handler)
    with pytest.raises(ValueError, match="getWidget has a handler already"):
        methods.register("getWidget", widget_handler)
    with pytest.raises(ValueError, match="noSuchMethod is not declared"):
        methods.register("noSuchMethod", widget_handler)


def test_the_parsed_value_is_checked_against_its_type() -> None:
    methods: Registry[Any] = Registry([WIDGET])
    methods.register("getWidget", widget_handler)
    item = plan(methods, "getWidget", [3])
    with pytest.raises(TypeError, match="getWidget: planning parsed Widget, expected int"):
        item.parsed(int)


def test_the_gateway_registers_every_local_method_it_can_answer(tmp_path: Path) -> None:
    """Without a block engine the bundle methods are declared but not registered: refused, and so listed."""
    app = GatewayApp(Settings(**service_key_settings(tmp_path), home=tmp_path))
    bundle_methods = {"sendBundle", "simulateBundle", "getBundleStatuses", "getInflightBundleStatuses"}
    assert app.methods.not_available == bundle_methods | {"getTipAccounts", "getTipFloor"}
    local = {spec.name for spec in method_registry() if spec.local}
    assert set(app.methods.handlers) == local - app.methods.not_available
    assert set(app.forwarder.local) == set(app.methods.handlers)


def test_every_mcp_tool_calls_a_declared_method() -> None:
    methods = method_registry()
    for tool in TOOLS:
        if tool.name == "rpc":
            continue
        method, _ = tool.request(dict.fromkeys(tool.input_schema.get("required", ()), "x"))
        assert methods.spec(method) is not None, (tool.name, method)

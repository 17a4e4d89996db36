"""The one list of features (gateway/app/features.py): every feature package's declaration (its feature.py) is
in it, and what each declares is what the replica serves: its JSON-RPC methods in the registry with their
handlers, its settings model among the replica's settings, its routes mounted after the transports' own
and described exactly by its part of the OpenAPI document. Built from a real GatewayApp with a block
engine configured (the relay's routes and methods then exist); nothing is started."""

from __future__ import annotations

import importlib
import inspect
from pathlib import Path

import pytest
from starlette.routing import Route

from gateway.app.features import FEATURES, AppSettings, feature_routes, method_registry
from gateway.app.replica import GatewayApp
from gateway.base.config import ServiceSettings
from gateway.pipeline.declaration import Feature
from gateway.transports.http import build_starlette_app
from gateway.transports.openapi import openapi_document
from tests.support import service_key_settings

GATEWAY = Path(__file__).resolve().parents[1] / "gateway"
#: Pages, not API: Swagger UI and the web UI.
PAGES = {"/docs", "/app"}


@pytest.fixture(scope="module")
def gw(tmp_path_factory: pytest.TempPathFactory) -> GatewayApp:
    home: Path = tmp_path_factory.mktemp("features")
    return GatewayApp(AppSettings(**service_key_settings(home), home=home, block_engine_url="http://127.0.0.1:9"))


def _packages_with(module: str) -> list[str]:
    return sorted(path.parent.name for path in GATEWAY.glob(f"*/{module}.py"))


def _declared(package: str) -> Feature[object]:
    feature: Feature[object] = importlib.import_module(f"gateway.{package}.feature").FEATURE
    return feature


def test_every_feature_package_is_in_the_list_once() -> None:
    assert sorted(feature.name for feature in FEATURES) == _packages_with("feature")
    for package in _packages_with("feature"):
        assert any(feature is _declared(package) for feature in FEATURES), package


def test_every_packages_methods_are_declared_by_its_feature_and_registered() -> None:
    """A package's methods.py is collected through its declaration: leaving it out of the declaration, or
    the declaration out of the list, leaves its methods unknown to planning."""
    registry = method_registry()
    for package in set(_packages_with("methods")) - {"core"}:  # the kernel's is MethodSpec itself
        specs = importlib.import_module(f"gateway.{package}.methods").SPECS
        assert specs and _declared(package).methods == specs, package
        assert all(registry.spec(spec.name) is spec for spec in specs), package
    assert sum(len(feature.methods) for feature in FEATURES) == len(list(registry))


def test_with_a_block_engine_every_local_method_has_its_features_handler(gw: GatewayApp) -> None:
    local = {spec.name for spec in gw.methods if spec.local}
    assert gw.methods.not_available == frozenset()
    assert set(gw.methods.handlers) == local == set(gw.forwarder.local)
    for feature in FEATURES:
        built = feature.handlers(gw)
        assert set(built) == {spec.name for spec in feature.methods if spec.local}, feature.name


def test_every_declared_settings_model_is_among_the_replicas_settings() -> None:
    """AppSettings is written out (so that mypy types its fields): a feature's model missing from its
    bases fails here."""
    declared = [feature.settings for feature in FEATURES if feature.settings is not None]
    assert declared
    for model in declared:
        assert issubclass(AppSettings, model), model.__name__


def test_every_settings_model_of_a_package_is_declared_by_its_feature() -> None:
    for package in set(_packages_with("settings")) - {"app"}:  # app/settings.py: the replica's, joining them all
        module = importlib.import_module(f"gateway.{package}.settings")
        models = [
            cls
            for _, cls in inspect.getmembers(module, inspect.isclass)
            if cls.__module__ == module.__name__ and issubclass(cls, ServiceSettings)
        ]
        assert models, package
        assert _declared(package).settings in models, package
        assert all(issubclass(AppSettings, cls) for cls in models), package


def test_each_feature_describes_exactly_the_routes_it_mounts(gw: GatewayApp) -> None:
    for feature in FEATURES:
        mounted = {
            (route.path, verb)
            for route in feature.routes(gw)
            if isinstance(route, Route) and route.path not in PAGES
            for verb in route.methods or ()
            if verb != "HEAD"  # Starlette's, beside every GET
        }
        described = {
            (path, verb.upper())
            for part in feature.api
            for path, operations in part.paths().items()
            for verb in operations
        }
        assert mounted == described, feature.name


def test_the_document_describes_every_route_the_app_serves(gw: GatewayApp) -> None:
    app = build_starlette_app(gw)
    served = {route.path for route in app.routes if isinstance(route, Route)} - PAGES
    assert served == set(openapi_document()["paths"])


def test_the_features_routes_come_last_in_the_lists_order(gw: GatewayApp) -> None:
    """Starlette matches in order: the transports' own routes first, then the list's."""
    routes = build_starlette_app(gw).routes
    features = feature_routes(gw)
    mine = [(getattr(route, "path", None), getattr(route, "methods", None)) for route in routes[-len(features) :]]
    assert mine == [(getattr(route, "path", None), getattr(route, "methods", None)) for route in features]
    assert {route.path for route in features if isinstance(route, Route)} >= {"/relay/sendBundle", "/webhooks"}

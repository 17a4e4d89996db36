"""The one list of features (gateway/features.py): each feature's part of the OpenAPI document describes
exactly the routes it mounts, and the HTTP app serves the list's routes after its own, so the document
describes every route (the web UI's pages and /docs aside). Built from a real GatewayApp with a block engine
configured (the relay's routes then exist); nothing is started: the routes are only read."""

from __future__ import annotations

from pathlib import Path

import pytest
from starlette.routing import Route

from gateway.app import AppSettings, GatewayApp
from gateway.features import FEATURES, feature_routes
from gateway.openapi import openapi_document
from gateway.transports.http import build_starlette_app
from tests.support import service_key_settings

#: Pages, not API: Swagger UI and the web UI.
PAGES = {"/docs", "/app"}


@pytest.fixture(scope="module")
def gw(tmp_path_factory: pytest.TempPathFactory) -> GatewayApp:
    home: Path = tmp_path_factory.mktemp("features")
    return GatewayApp(AppSettings(**service_key_settings(home), home=home, block_engine_url="http://127.0.0.1:9"))


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

"""``/capabilities`` and ``/health`` say ``yellowstone_grpc`` exactly when the stream is served (server
actors wanted and an upstream geyser endpoint to re-serve, as ``gateway up`` resolves it), and ``/pricing``
publishes the stream's prices and limits."""

from __future__ import annotations

from pathlib import Path

from gateway.app.features import method_registry
from gateway.app.replica import GatewayApp
from gateway.app.settings import Settings
from gateway.core.methods import PriceTable
from gateway.public.documents import capabilities_document, pricing_document
from tests.support import service_key_settings


async def test_the_profile_follows_the_stream(tmp_path: Path) -> None:
    served = GatewayApp(
        Settings(**service_key_settings(tmp_path), home=tmp_path, upstream_grpc_url="http://127.0.0.1:10001")
    )
    assert capabilities_document(served.profile)["service_profile"]["services"]["yellowstone_grpc"] is True
    assert served.profile.health_view()["services"]["yellowstone_grpc"] is True
    for settings in (
        Settings(**service_key_settings(tmp_path), home=tmp_path),
        Settings(**service_key_settings(tmp_path), home=tmp_path, upstream_grpc_url="http://x:1", grpc_servers=0),
    ):
        app = GatewayApp(settings)
        assert capabilities_document(app.profile)["service_profile"]["services"]["yellowstone_grpc"] is False


def test_pricing_publishes_the_stream_prices() -> None:
    grpc = pricing_document(PriceTable.default(), 100_000, 3600, method_registry())["grpc"]
    assert (grpc["unary_credits"], grpc["subscribe_credits"], grpc["interval_credits"]) == (1, 1, 60)
    assert (grpc["interval_s"], grpc["max_streams_per_account"]) == (60.0, 10)
    assert (grpc["max_filters_per_server"], grpc["max_filters_per_account"]) == (64, 16)
    assert grpc["max_stream_opens_per_minute"] == 30 and "from_slot replay counts" in str(grpc["billed"])


async def test_pricing_shows_the_configured_stream_limits(tmp_path: Path) -> None:
    settings = Settings(
        **service_key_settings(tmp_path),
        home=tmp_path,
        grpc_max_streams_per_account=3,
        grpc_max_streams_per_address=7,
        upstream_grpc_max_filters=32,
        grpc_max_stream_opens_per_minute=5,
    )
    app = GatewayApp(settings)
    grpc = pricing_document(PriceTable.default(), 100_000, 3600, method_registry(), grpc_limits=app.grpc_limits)["grpc"]
    assert (grpc["max_streams_per_account"], grpc["max_streams_per_address"]) == (3, 7)
    assert (grpc["max_filters_per_server"], grpc["max_filters_per_account"]) == (32, 8)
    assert grpc["max_stream_opens_per_minute"] == 5

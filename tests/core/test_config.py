"""Settings: environment, TOML file, and clear messages for bad values."""

from __future__ import annotations

import importlib
import pkgutil
from pathlib import Path

import pytest

import gateway
from gateway.app.settings import Settings, load_settings
from gateway.base.config import ConfigError, ServiceSettings
from gateway.webhooks.settings import WebhookSettings


def test_defaults_are_the_embedded_service(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("GATEWAY_CONFIG", "RAY_ADDRESS", "GATEWAY_PORT", "GATEWAY_HOME"):
        monkeypatch.delenv(name, raising=False)
    s = load_settings()
    assert (s.host, s.port, s.grpc_port) == ("127.0.0.1", 8000, 10000)
    assert s.database_url is None and s.redis_url is None and s.upstream_rpc_url is None
    assert s.home == Path(".gateway")


def test_environment_and_toml(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    toml = tmp_path / "gw.toml"
    toml.write_text('port = 8100\nupstream_rpc_url = "http://127.0.0.1:9999"\n[pricing]\nREAD_CHEAP = 2\n')
    monkeypatch.setenv("GATEWAY_PORT", "8200")  # environment beats the file
    monkeypatch.setenv("RAY_ADDRESS", "ray://10.0.0.1:10001")
    s = load_settings(toml)
    assert s.port == 8200 and s.pricing == {"READ_CHEAP": 2}
    assert s.ray_address == "ray://10.0.0.1:10001"
    assert s.derived_ws_url() == "ws://127.0.0.1:10000"


@pytest.mark.parametrize(
    ("name", "value", "needle"),
    [
        ("GATEWAY_PORT", "99999", "GATEWAY_PORT"),
        ("GATEWAY_DATABASE_URL", "mysql://x", "postgresql://"),
        ("GATEWAY_UPSTREAM_RPC_URL", "ftp://node", "http://"),
        ("GATEWAY_PRICING", '{"READ_CHEEP": 1}', "unknown method class"),
        ("GATEWAY_NO_SUCH_SETTING", "1", None),
    ],
)
def test_bad_values_give_a_readable_error(
    monkeypatch: pytest.MonkeyPatch, name: str, value: str, needle: str | None
) -> None:
    monkeypatch.setenv(name, value)
    if needle is None:  # unknown environment variables are simply not settings
        load_settings()
        return
    with pytest.raises(ConfigError) as info:
        load_settings()
    assert needle in str(info.value)


def test_missing_config_file(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="not found"):
        load_settings(tmp_path / "absent.toml")


@pytest.mark.parametrize("credits", [0, -5])
def test_pricing_refuses_free_and_negative_classes(credits: int) -> None:
    with pytest.raises(ConfigError, match="READ_CHEAP"):
        load_settings(pricing={"READ_CHEAP": credits})


def test_a_lease_outlives_several_flushes() -> None:
    with pytest.raises(ConfigError, match=r"credit_flush_interval_s .* lease_ttl_s"):
        load_settings(credit_flush_interval_s=10, lease_ttl_s=30)
    assert load_settings(credit_flush_interval_s=1, lease_ttl_s=4).lease_ttl_s == 4


@pytest.mark.parametrize(
    ("name", "value", "message"),
    [
        ("ip_limits", {"nope": {"rps": 1, "burst": 1}}, "unknown group"),
        ("ip_limits", {"session": {"rps": 0, "burst": 1}}, "greater than 0"),
        ("trusted_proxies", ["not-an-address"], "not an IP address"),
    ],
)
def test_abuse_settings_are_checked(name: str, value: object, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        load_settings(**{name: value})


def test_ingress_autoscaling_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(
        "GATEWAY_INGRESS_AUTOSCALING", '{"min_replicas": 2, "max_replicas": 5, "target_ongoing_requests": 8}'
    )
    s = load_settings()
    assert s.ingress_autoscaling is not None
    assert (s.ingress_autoscaling.min_replicas, s.ingress_autoscaling.max_replicas) == (2, 5)
    assert s.ingress_autoscaling.target_ongoing_requests == 8
    assert s.share_replicas == 5  # the replica-local shares never add up to more than the whole
    monkeypatch.delenv("GATEWAY_INGRESS_AUTOSCALING")
    assert load_settings(ingress_replicas=3).share_replicas == 3
    assert load_settings().ingress_autoscaling is None  # off by default


@pytest.mark.parametrize(
    ("autoscaling", "others", "message"),
    [
        ({"min_replicas": 3, "max_replicas": 2}, {}, r"min_replicas \(3\) is more than max_replicas \(2\)"),
        ({"min_replicas": 0, "max_replicas": 2}, {}, "greater than or equal to 1"),
        ({"max_replicas": 65}, {}, "less than or equal to 64"),
        ({"min_replicas": 1}, {}, "max_replicas.*Field required"),
        ({"max_replicas": 2, "target_ongoing_requests": 0}, {}, "greater than 0"),
        ({"max_replicas": 2, "upscale_delay": 1}, {}, "Extra inputs are not permitted"),
        ({"max_replicas": 2}, {"account_shards": 0}, "GATEWAY_INGRESS_AUTOSCALING.*GATEWAY_ACCOUNT_SHARDS"),
        ({"max_replicas": 2}, {"ingress_mode": "proxy"}, "needs ingress_mode haproxy"),
        ({"max_replicas": 2}, {"ingress_mode": "direct"}, "needs ingress_mode haproxy"),
        ({"max_replicas": 2}, {"ingress_replicas": 2}, "leave it at 1"),
    ],
)
def test_ingress_autoscaling_is_checked(
    autoscaling: dict[str, object], others: dict[str, object], message: str
) -> None:
    with pytest.raises(ConfigError, match=message):
        load_settings(ingress_autoscaling=autoscaling, **others)


def feature_models() -> list[type[ServiceSettings]]:
    """Every settings model a feature declares (``gateway/<feature>/settings.py``), found by walking the package."""
    models: list[type[ServiceSettings]] = []
    for info in pkgutil.walk_packages(gateway.__path__, "gateway."):
        if info.name.endswith(".settings") and info.name != "gateway.app.settings":
            module = importlib.import_module(info.name)
            models += [
                value
                for value in vars(module).values()
                if isinstance(value, type) and issubclass(value, ServiceSettings) and value.__module__ == info.name
            ]
    return models


def test_the_root_composes_every_features_settings() -> None:
    # A feature model left out of the composition would leave its GATEWAY_* variables unread.
    models = feature_models()
    assert len(models) >= 9
    assert [m.__name__ for m in models if not issubclass(Settings, m)] == []
    declared = {name for m in [ServiceSettings, *models] for name in m.model_fields}
    assert declared - set(Settings.model_fields) == set()


def test_each_part_validates_its_own_model_from_the_whole_settings() -> None:
    # Actors are sent Settings.model_dump and validate only their feature's model from it: the other
    # features' fields are ignored there, and the feature's own values and checks hold.
    whole = load_settings(webhook_concurrency=7, signal_poll_s=0.5, send_racers=3, lease_ttl_s=40)
    sent = whole.model_dump(mode="json")
    for model in feature_models():
        own = model.model_validate(sent)
        assert {name: getattr(own, name) for name in model.model_fields} == {
            name: getattr(whole, name) for name in model.model_fields
        }, model.__name__
    with pytest.raises(ValueError, match="webhook_lease_s"):
        WebhookSettings.model_validate({**sent, "webhook_lease_s": 5})
    with pytest.raises(ConfigError, match="Extra inputs"):
        load_settings(no_such_setting=1)  # the root still refuses what no model declares

"""A node's secrets in the settings (docs/configuration.md, A pool of nodes): given by reference in
``upstreams`` they are read where the settings are built and written out (the settings Ray hands every
process) as the reference only; given as values they keep working, with a warning naming them (never the
value); and no setting's value appears in an error, its traceback included (gateway/app/settings.py,
pydantic's ``input_value``)."""

from __future__ import annotations

import json
import logging
import os
import traceback
from pathlib import Path

import pytest
from pydantic import ValidationError

from gateway.app.settings import Settings, load_settings
from gateway.base.config import ConfigError

SECRET = "s3cret-in-a-setting"


@pytest.fixture(autouse=True)
def _no_gateway_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    """Only what a test sets: none of the session's GATEWAY_* variables."""
    for name in [n for n in os.environ if n.startswith("GATEWAY_")]:
        monkeypatch.delenv(name)


def test_references_are_read_and_written_out_as_references(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    token = tmp_path / "token"
    token.write_text(f"{SECRET}-token\n")
    monkeypatch.setenv("PROVIDER_URL", f"https://rpc.provider.example/v2/{SECRET}")
    monkeypatch.setenv("PROVIDER_KEY", f"{SECRET}-header")
    config = tmp_path / "gateway.toml"
    config.write_text(
        f"""
[[upstreams]]
name = "provider"
rpc_url = {{ env = "PROVIDER_URL" }}
grpc_url = "https://geyser.provider.example"
grpc_token = {{ file = "{token}" }}
headers = {{ "x-api-key" = {{ env = "PROVIDER_KEY" }} }}
"""
    )
    settings = load_settings(config)
    (node,) = settings.pool_nodes()
    assert node.rpc_url == f"https://rpc.provider.example/v2/{SECRET}"
    assert (node.grpc_token, node.headers) == (f"{SECRET}-token", {"x-api-key": f"{SECRET}-header"})
    assert node.values_given() == []
    handed = settings.model_dump(mode="json")  # what gateway up hands the Serve app and the actors
    assert SECRET not in json.dumps(handed)
    assert handed["upstreams"][0]["rpc_url"] == {"env": "PROVIDER_URL"}
    assert handed["upstreams"][0]["headers"] == {"x-api-key": {"env": "PROVIDER_KEY"}}
    assert Settings.model_validate(handed).pool_nodes()[0].headers == node.headers  # a replica reads them again
    assert SECRET not in repr(settings)


def test_a_value_given_keeps_working_with_a_warning_that_names_it(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    entry = {"name": "old", "rpc_url": f"https://rpc.example/?api-key={SECRET}", "headers": {"x-key": SECRET}}
    monkeypatch.setenv("GATEWAY_UPSTREAMS", json.dumps([entry, {"name": "own", "rpc_url": "http://10.0.0.1:8899"}]))
    with caplog.at_level(logging.WARNING, logger="gateway.app.settings"):
        settings = load_settings()
    assert settings.pool_nodes()[0].rpc_url == entry["rpc_url"]  # as before
    warned = [r.getMessage() for r in caplog.records]
    assert len(warned) == 1 and "node old: rpc_url, headers.x-key given as a value" in warned[0], warned
    assert SECRET not in warned[0]
    caplog.clear()
    monkeypatch.delenv("GATEWAY_UPSTREAMS")
    monkeypatch.setenv("GATEWAY_UPSTREAM_RPC_URL", f"https://rpc.example/{SECRET}")
    with caplog.at_level(logging.WARNING, logger="gateway.app.settings"):
        load_settings()
    assert [r.getMessage().split(" given")[0] for r in caplog.records] == ["upstream_rpc_url"]


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("GATEWAY_UPSTREAMS", json.dumps([{"name": "a", "rpc_url": f"ftp://node.example/?api-key={SECRET}"}])),
        ("GATEWAY_UPSTREAMS", json.dumps([{"name": "a", "rpc_url": "http://n", "headers": {"Host": SECRET}}])),
        ("GATEWAY_UPSTREAMS", json.dumps([{"name": "a", "rpc_url": "http://n", "grpc_token": 7, "ws_url": SECRET}])),
        ("GATEWAY_UPSTREAMS", f'[{{"name": "a", "rpc_url": "{SECRET}'),  # not JSON
        ("GATEWAY_UPSTREAM_RPC_URL", f"ftp://node.example/{SECRET}"),
        ("GATEWAY_DATABASE_URL", f"mysql://gateway:{SECRET}@db.internal/gateway"),
        ("GATEWAY_API_KEY_SECRET", SECRET),
        ("GATEWAY_PORT", SECRET),
    ],
)
def test_a_bad_setting_never_shows_its_value(monkeypatch: pytest.MonkeyPatch, name: str, value: str) -> None:
    monkeypatch.setenv(name, value)
    with pytest.raises(ConfigError) as caught:
        load_settings()
    shown = "".join(traceback.format_exception(caught.value))  # what a log of the traceback holds
    assert SECRET not in shown and name.removeprefix("GATEWAY_").lower() in str(caught.value), shown


def test_a_replica_validating_bad_settings_never_shows_a_value() -> None:
    """A Serve replica validates the settings it is handed (gateway/runtime/ingress.py): its traceback is in
    Serve's logs."""
    handed = {"upstreams": [{"name": "a", "rpc_url": f"https://n/?api-key={SECRET}", "roles": ["pubsub"]}]}
    with pytest.raises(ValidationError) as caught:
        Settings.model_validate(handed)
    assert SECRET not in "".join(traceback.format_exception(caught.value))

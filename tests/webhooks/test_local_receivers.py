"""Webhooks can be tried locally: ``gateway up`` on the embedded devnode accepts local receivers
(``webhook_allow_private`` on by default there, off with a real node, an explicit setting winning either
way) and says so (its report, ``/capabilities``); a refusal of a local receiver names the setting that
accepts one; and ``gateway_client.webhooks`` verifies a delivery's signature as the dispatcher signs it."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from gateway.app.replica import GatewayApp
from gateway.app.settings import Settings, load_settings
from gateway.public.documents import capabilities_document
from gateway.webhooks import targets
from gateway.webhooks.rules import signature
from gateway.webhooks.validation import url_problem
from gateway_client.webhooks import verify_webhook, webhook_signature
from tests.support import service_key_settings

REAL_NODE = "https://rpc.example.com"
SETTING = "GATEWAY_WEBHOOK_ALLOW_PRIVATE=true"


@pytest.fixture(autouse=True)
def _no_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("GATEWAY_WEBHOOK_ALLOW_PRIVATE", "GATEWAY_UPSTREAM_RPC_URL", "GATEWAY_CONFIG"):
        monkeypatch.delenv(name, raising=False)


def test_the_embedded_devnode_accepts_local_receivers_and_a_real_node_does_not() -> None:
    assert targets.allow_private(Settings()) is True  # no upstream_rpc_url: gateway up starts the devnode
    assert targets.allow_private(Settings(upstream_rpc_url=REAL_NODE)) is False


@pytest.mark.parametrize("upstream", [None, REAL_NODE])
@pytest.mark.parametrize("explicit", [True, False])
def test_an_explicit_setting_wins_either_way(upstream: str | None, explicit: bool) -> None:
    assert targets.allow_private(Settings(upstream_rpc_url=upstream, webhook_allow_private=explicit)) is explicit


def test_the_setting_counts_as_explicit_from_the_environment_and_the_file(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("GATEWAY_WEBHOOK_ALLOW_PRIVATE", "false")
    assert targets.allow_private(load_settings()) is False  # the devnode, told not to
    monkeypatch.delenv("GATEWAY_WEBHOOK_ALLOW_PRIVATE")
    config = tmp_path / "gateway.toml"
    config.write_text(f'upstream_rpc_url = "{REAL_NODE}"\nwebhook_allow_private = true\n')
    assert targets.allow_private(load_settings(config)) is True  # a real node, told to
    config.write_text(f'upstream_rpc_url = "{REAL_NODE}"\n')
    assert targets.allow_private(load_settings(config)) is False


def test_gateway_up_reports_which_receivers_are_accepted() -> None:
    devnode = targets.receivers_report(Settings())
    assert devnode.startswith("local receivers accepted") and "embedded devnode" in devnode
    assert "GATEWAY_WEBHOOK_ALLOW_PRIVATE=false" in devnode
    told = targets.receivers_report(Settings(upstream_rpc_url=REAL_NODE, webhook_allow_private=True))
    assert told.startswith("local receivers accepted") and "development only" in told
    strict = targets.receivers_report(Settings(upstream_rpc_url=REAL_NODE))
    assert "public addresses" in strict and SETTING in strict
    refused = targets.receivers_report(Settings(webhook_allow_private=False))
    assert "webhook_allow_private = false" in refused and SETTING in refused


def test_capabilities_say_whether_local_receivers_are_accepted(tmp_path: Path) -> None:
    for allowed in (True, False):
        app = GatewayApp(Settings(**service_key_settings(tmp_path), home=tmp_path, webhook_allow_private=allowed))
        services = capabilities_document(app.profile)["service_profile"]["services"]
        assert services["webhook_private_targets"] is allowed


@pytest.mark.parametrize(
    "url",
    ["http://127.0.0.1:8080/hook", "https://127.0.0.1:8443/", "https://localhost/", "https://192.168.1.10/"],
)
def test_a_refused_local_receiver_names_the_setting(url: str) -> None:
    problem = url_problem(url, allow_private=False)
    assert problem is not None and SETTING in problem and "development gateway" in problem
    assert url_problem(url, allow_private=True) is None
    assert url_problem("ftp://hooks.example.com/", allow_private=False) == "url must start with https://"


def test_a_refusal_at_connect_names_the_setting() -> None:
    why = None
    try:
        targets.guarded_socket((2, 1, 6, "", ("127.0.0.1", 9)))
    except targets.RefusedTarget as exc:
        why = exc.reason
    assert why is not None and why.startswith("127.0.0.1 is a loopback address") and SETTING in why


SECRET = "whsec_test"
EVENT = "evt_42_1077"
BODY = b'{"event_id":"evt_42_1077","type":"api_key.rotated"}'


def delivery_headers(secret: str = SECRET, timestamp: int | None = None, body: bytes = BODY) -> dict[str, str]:
    """The headers the dispatcher sends, signed by the server's own signer."""
    stamp = int(time.time()) if timestamp is None else timestamp
    return {
        "X-Webhook-Signature": signature(secret, EVENT, stamp, body),
        "X-Webhook-Timestamp": str(stamp),
        "X-Webhook-Event-Id": EVENT,
        "X-Webhook-Id": "42",
    }


def test_the_client_verifies_what_the_dispatcher_signs() -> None:
    headers = delivery_headers()
    assert webhook_signature(SECRET, EVENT, headers["X-Webhook-Timestamp"], BODY) == headers["X-Webhook-Signature"]
    assert verify_webhook(SECRET, headers, BODY)
    assert verify_webhook(SECRET, {k.lower(): v for k, v in headers.items()}, BODY)  # names in any case
    assert verify_webhook(["whsec_old", SECRET], headers, BODY)  # both secrets during a rotation


def test_the_client_refuses_what_was_not_signed_so() -> None:
    headers = delivery_headers()
    assert not verify_webhook("whsec_other", headers, BODY)
    assert not verify_webhook(SECRET, headers, BODY + b" ")  # the body altered
    assert not verify_webhook(SECRET, {**headers, "X-Webhook-Event-Id": "evt_42_1078"}, BODY)
    old = delivery_headers(timestamp=int(time.time()) - 301)
    assert not verify_webhook(SECRET, old, BODY)  # an old attempt replayed
    assert verify_webhook(SECRET, old, BODY, tolerance_s=600)
    for name in ("X-Webhook-Signature", "X-Webhook-Timestamp", "X-Webhook-Event-Id"):
        assert not verify_webhook(SECRET, {k: v for k, v in headers.items() if k != name}, BODY)
    assert not verify_webhook(SECRET, {**headers, "X-Webhook-Timestamp": "soon"}, BODY)
    assert not verify_webhook(SECRET, {**headers, "X-Webhook-Signature": "sha256=é"}, BODY)

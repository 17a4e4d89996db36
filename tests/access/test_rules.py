"""The pure access rules (gateway/access/rules.py): input checked and normalised, requests decided."""

from __future__ import annotations

from urllib.parse import urlsplit

import pytest

from gateway.access.rules import (
    WEBHOOK_ACTIONS,
    AccessRules,
    RulesInvalid,
    address_allowed,
    method_allowed,
    origin_allowed,
    own_origins,
    parse_rules,
    webhook_allowed,
)
from gateway.core.client_address import grpc_peer_host

KNOWN = ("getSlot", "getBalance")
#: The gateway's own origins when its public_url is http://gw.local:8000.
OWN = own_origins("http://gw.local:8000", (), 8000)


def test_entries_are_normalised_and_deduplicated() -> None:
    rules = parse_rules(
        {
            "origins": ["HTTPS://App.Example.com/", "https://app.example.com", "http://localhost:5173"],
            "addresses": ["127.0.0.1", "::1", "10.0.0.0/8"],
            "methods": ["getSlot", "READ_HEAVY", "SUBSCRIPTION"],
        },
        KNOWN,
    )
    assert rules.origins == ("https://app.example.com", "http://localhost:5173")
    assert rules.addresses == ("127.0.0.1/32", "::1/128", "10.0.0.0/8")
    assert rules.methods == ("getSlot", "READ_HEAVY", "SUBSCRIPTION")


@pytest.mark.parametrize(
    ("origin", "allowed"),
    [
        ("https://app.example.com", True),
        ("https://APP.example.com/", True),
        ("http://app.example.com", False),  # another scheme
        ("https://app.example.com:8443", False),  # another port
        ("https://a.example.org", True),
        ("https://a.b.example.org", True),
        ("https://example.org", False),  # the wildcard's apex
        ("https://badexample.org", False),
        ("https://example.org.evil.com", False),
        ("null", False),
        (None, True),  # no Origin: not a browser page (the rate and the cap bound those)
        ("http://gw.local:8000", True),  # the gateway's own page
        ("HTTP://GW.local:8000/", True),
        ("https://gw.local:8000", False),  # another scheme: another origin
        ("http://127.0.0.1:8000", False),  # a public_url is set: loopback is not the gateway's page then
    ],
)
def test_origins(origin: str | None, allowed: bool) -> None:
    rules = AccessRules(origins=("https://app.example.com", "https://*.example.org"))
    assert origin_allowed(rules, origin, OWN) is allowed
    # the Host header never makes an origin the gateway's own (a DNS-rebinding page sends its own name there)
    host = None if origin is None else urlsplit(origin.lower()).netloc
    assert origin_allowed(rules, origin, frozenset(), host=host) is (allowed and host != "gw.local:8000")


@pytest.mark.parametrize(
    ("origin", "fetch_site", "allowed"),
    [
        (None, None, True),  # neither header: a server, a script outside a browser
        (None, "same-origin", True),  # the gateway's own page's GET (a browser sends no Origin with it)
        (None, "none", True),  # typed in the address bar, a bookmark
        (None, " Same-Origin ", True),
        (None, "cross-site", False),  # another site's <img>, <script>, link or form GET
        (None, "same-site", False),  # another origin of the same site is another page all the same
        (None, "", False),
        (None, "bogus", False),
        ("https://app.example.com", "cross-site", True),  # the Origin decides when there is one
        ("https://evil.example.net", "same-origin", False),
    ],
)
def test_a_browser_request_from_another_site_needs_an_origin(
    origin: str | None, fetch_site: str | None, allowed: bool
) -> None:
    rules = AccessRules(origins=("https://app.example.com",))
    assert origin_allowed(rules, origin, OWN, fetch_site, "gw.local:8000") is allowed
    assert origin_allowed(AccessRules(methods=("getSlot",)), origin, OWN, fetch_site, "gw.local:8000")  # no rule


@pytest.mark.parametrize(
    ("host", "allowed"),
    [
        ("gw.local:8000", True),  # the gateway's own page's GET
        ("GW.local:8000", True),
        ("evil.example:8000", False),  # a page at a name rebound to the gateway: same-origin to itself only
        ("gw.local", False),  # another port, another origin
        (None, False),
    ],
)
def test_a_same_origin_request_without_an_origin_is_the_gateways_only_at_its_own_host(
    host: str | None, allowed: bool
) -> None:
    rules = AccessRules(origins=("https://app.example.com",))
    assert origin_allowed(rules, None, OWN, "same-origin", host) is allowed


def test_the_gateways_own_origins_come_from_its_configuration() -> None:
    embedded = own_origins(None, (), 8000)  # make up: no public_url
    assert {"http://127.0.0.1:8000", "http://localhost:8000", "http://[::1]:8000"} <= embedded
    assert "http://127.0.0.1:8001" not in embedded
    public = own_origins("https://rpc.example.com", ("https://RPC2.example.com:443",), 8000)
    assert public == {"https://rpc.example.com", "https://rpc2.example.com"}  # no loopback behind a public_url
    assert own_origins(None, ("https://rpc.example.com",), 9000) >= {"https://rpc.example.com", "http://localhost:9000"}


def test_webhook_actions_none_under_any_rule_every_one_without_rules() -> None:
    for action in WEBHOOK_ACTIONS:
        assert webhook_allowed(AccessRules(), action)
        assert not webhook_allowed(AccessRules(methods=("getBalance",)), action)
        assert not webhook_allowed(AccessRules(rate=5), action)
    listed = parse_rules({"webhooks": ["list", " Deliveries", "list"]}, KNOWN)
    assert listed.webhooks == ("list", "deliveries") and not listed.empty
    assert listed.document()["webhooks"] == ["list", "deliveries"]
    assert webhook_allowed(listed, "list") and webhook_allowed(listed, "deliveries")
    assert not webhook_allowed(listed, "create") and not webhook_allowed(listed, "rotate-secret")
    every = parse_rules({"methods": ["getSlot"], "webhooks": list(WEBHOOK_ACTIONS)}, KNOWN)
    assert all(webhook_allowed(every, action) for action in WEBHOOK_ACTIONS)
    assert parse_rules({"webhooks": []}, KNOWN).empty


def test_addresses_and_mapped_ipv4() -> None:
    networks = AccessRules(addresses=("10.0.0.0/8", "2001:db8::/32")).networks()
    assert address_allowed(networks, "10.1.2.3")
    assert address_allowed(networks, "::ffff:10.1.2.3")
    assert address_allowed(networks, "2001:db8::1")
    assert not address_allowed(networks, "11.0.0.1")
    assert not address_allowed(networks, "unknown")
    assert address_allowed((), "unknown")  # no rule: any address


def test_methods_by_name_or_class() -> None:
    rules = AccessRules(methods=("getSlot", "READ_MEDIUM"))
    assert method_allowed(rules, "getSlot", "READ_CHEAP")
    assert method_allowed(rules, "getTransaction", "READ_MEDIUM")
    assert not method_allowed(rules, "getBalance", "READ_CHEAP")
    assert method_allowed(AccessRules(), "getBalance", "READ_CHEAP")


@pytest.mark.parametrize(
    "document",
    [
        {"origins": ["https://*"]},
        {"origins": ["https://user@example.com"]},
        {"origins": ["https://example.com?x=1"]},
        {"origins": ["https://example.com:99999"]},
        {"addresses": ["300.0.0.1"]},
        {"addresses": ["10.0.0.0/33"]},
        {"methods": ["requestAirdrop"]},
        {"methods": [""]},
        {"addresses": [f"10.0.0.{i}" for i in range(65)]},
        {"methods": [1]},
        {"webhooks": ["read"]},
        {"webhooks": ["rotate_secret"]},
        {"webhooks": "list"},
        {"webhooks": [*WEBHOOK_ACTIONS, "list"]},
    ],
)
def test_bad_input_is_refused(document: dict[str, object]) -> None:
    with pytest.raises(RulesInvalid):
        parse_rules(document, KNOWN)


def test_grpc_peer_names() -> None:
    assert grpc_peer_host("ipv4:127.0.0.2:5000") == "127.0.0.2"
    assert grpc_peer_host("ipv6:[::1]:5000") == "::1"
    assert grpc_peer_host("unix:/tmp/s") == "unix:/tmp/s"

"""The pool's settings: a node entry's checks (gateway/core/upstreams.py), the pool from ``upstreams`` or from
the single-node settings (gateway/base/config.py), and a caller's floors (gateway/core/slots.py)."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from gateway.app.settings import load_settings
from gateway.base.config import ConfigError, ServiceSettings
from gateway.core.methods import MethodClass
from gateway.core.slots import Floors, admits, needs, request_terms, shown
from gateway.core.upstreams import Role, Tier, UpstreamNode, role_of


def test_roles_default_to_what_the_urls_allow() -> None:
    plain = UpstreamNode(name="a", rpc_url="http://a:8899")
    full = UpstreamNode(name="b", rpc_url="https://b", ws_url="wss://b", grpc_url="https://b:10000")
    assert plain.roles == (Role.READS, Role.HEAVY, Role.SENDS)
    assert full.roles == tuple(Role)
    with pytest.raises(ValidationError, match="pubsub needs its URL"):
        UpstreamNode(name="c", rpc_url="http://c", roles=["reads", "pubsub"])


@pytest.mark.parametrize(
    ("entry", "message"),
    [
        ({"name": "Bad Name", "rpc_url": "http://a"}, "a node's name is"),
        ({"name": "a", "rpc_url": "ftp://a"}, "rpc_url must be a URL starting with http:// or https://"),
        ({"name": "a", "rpc_url": "http://a", "ws_url": "http://a"}, "ws_url must be a URL starting with ws://"),
        ({"name": "a", "rpc_url": "http://a", "headers": {"Host": "x"}}, "is not a header name a node entry may set"),
        ({"name": "a", "rpc_url": "http://a", "headers": {"x-key": "a\r\nb"}}, "holds a line break"),
        ({"name": "a", "rpc_url": "http://a", "roles": ["reads", "reads"]}, "a role is listed twice"),
        ({"name": "a", "rpc_url": "http://a", "tier": "third"}, "Input should be 'primary' or 'fallback'"),
    ],
)
def test_a_bad_entry_is_refused_with_a_message_and_never_its_url(entry: dict[str, object], message: str) -> None:
    entry = {**entry, "rpc_url": str(entry["rpc_url"]).replace("//a", "//a.secret-key-123")}
    with pytest.raises(ValidationError) as caught:
        UpstreamNode.model_validate(entry)
    text = "; ".join(e["msg"] for e in caught.value.errors())
    assert message in text and "secret-key-123" not in text


def test_the_single_node_settings_are_a_pool_of_one_or_two() -> None:
    one = ServiceSettings(upstream_rpc_url="http://n:8899")
    assert [(n.name, n.rpc_url, n.ws_url, n.tier) for n in one.pool_nodes()] == [
        ("primary", "http://n:8899", "ws://n:8900", Tier.PRIMARY)
    ]
    two = ServiceSettings(upstream_rpc_url="http://n:8899", fallback_rpc_url="https://f.example/k")
    primary, fallback = two.pool_nodes()
    assert (fallback.name, fallback.tier, fallback.roles) == (
        "fallback",
        Tier.FALLBACK,
        (Role.READS, Role.HEAVY, Role.SENDS),
    )
    assert primary.serves(Role.PUBSUB) and not fallback.serves(Role.PUBSUB)


def test_upstreams_from_the_environment_and_its_conflicts(monkeypatch: pytest.MonkeyPatch) -> None:
    pool = '[{"name":"a","rpc_url":"http://a:1","ws_url":"ws://a:2"},{"name":"b","rpc_url":"http://b:1","tier":"fallback"}]'
    monkeypatch.setenv("GATEWAY_UPSTREAMS", pool)
    settings = load_settings()
    assert [n.name for n in settings.pool_nodes()] == ["a", "b"] and settings.pubsub_node() == settings.upstreams[0]
    monkeypatch.setenv("GATEWAY_UPSTREAM_RPC_URL", "http://c:1")
    with pytest.raises(ConfigError, match="upstreams is set: leave upstream_rpc_url empty"):
        load_settings()
    monkeypatch.delenv("GATEWAY_UPSTREAM_RPC_URL")
    monkeypatch.setenv("GATEWAY_UPSTREAMS", '[{"name":"a","rpc_url":"http://a:1"},{"name":"a","rpc_url":"http://b:1"}]')
    with pytest.raises(ConfigError, match="node names must be unique: a more than once"):
        load_settings()
    monkeypatch.setenv("GATEWAY_UPSTREAMS", '[{"name":"a","rpc_url":"http://a:1","roles":["sends"]}]')
    with pytest.raises(ConfigError, match="no node serves reads"):
        load_settings()


def test_a_method_class_needs_its_role() -> None:
    assert role_of(MethodClass.READ_HEAVY) is Role.HEAVY and role_of(MethodClass.ARCHIVE_HISTORY) is Role.HEAVY
    assert role_of(MethodClass.SEND) is Role.SENDS and role_of(MethodClass.READ_CHEAP) is Role.READS


def test_what_an_answer_shows_raises_the_callers_floor_per_commitment() -> None:
    assert request_terms([]) == (2, None)  # finalized, Agave's default
    assert request_terms(["addr", {"commitment": "processed", "minContextSlot": 90}]) == (0, 90)
    assert request_terms([{"minContextSlot": True}]) == (2, None)  # a bool is not a slot
    assert shown("getSlot", 0, {"result": 105}) == (0, 105)
    assert shown("getBlockHeight", 1, {"result": 95}) == (4, 95)
    assert shown("getBalance", 2, {"result": {"context": {"slot": 101}, "value": 5}}) == (2, 101)
    assert shown("getSlot", 0, {"error": {"code": -32005}}) is None
    need = needs([0, 0, 100, 0, 0, 0], [(0, 120), (2, None), (2, 90)], [500] * 6)
    assert need == [120, 0, 100, 0, 0, 0]
    assert needs([0] * 6, [(0, 10**9)], [130, 129, 128, 9, 9, 9]) == [130, 0, 0, 0, 0, 0]  # not past every node
    assert admits([120, 119, 118, 10, 10, 10], need) and not admits([119, 119, 118, 10, 10, 10], need)


def test_floors_keep_the_callers_seen_lately() -> None:
    floors = Floors(max_callers=2)
    floors.of("a")[0] = 5
    floors.of("b")
    floors.of("a")
    floors.of("c")  # b is the least recently seen
    assert len(floors) == 2 and floors.of("a")[0] == 5 and floors.of("b")[0] == 0

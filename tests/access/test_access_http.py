"""Access rules through the real stack (docs/api.md, "Access rules"): each rule refuses the API key and a
session token, never a wallet-signed request; the refusal is 403 ACCESS_DENIED (-32030), free, and
counted; only the wallet changes the rules, and bad rules are refused 400."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import aiohttp
import asyncpg
import orjson
import pytest

from gateway.access.rules import ACCESS_DENIED_RPC
from gateway.app.settings import Settings
from tests.access.conftest import BODY, Owner, rpc
from tests.auth.helpers import Answer, request
from tests.recorded_metrics import Recorded, recording
from tests.support import RunningGateway

BALANCE = b'{"jsonrpc":"2.0","id":2,"method":"getBalance","params":["11111111111111111111111111111111"]}'


@pytest.fixture
def recorded() -> Iterator[Recorded]:
    with recording() as backend:
        yield backend


def denied(answer: Answer, rule: str) -> None:
    """A 403 refusal by the access rules: -32030 on the JSON-RPC routes, ACCESS_DENIED on the others."""
    assert answer.status == 403, answer
    assert answer.code in (ACCESS_DENIED_RPC, "ACCESS_DENIED"), answer
    assert rule in answer.json["error"]["message"], answer


async def usage_rows(gateway: RunningGateway, db: asyncpg.Connection, pubkey: str) -> int:
    await gateway.app.meter.flush()
    return int(await db.fetchval("SELECT count(*) FROM usage_history WHERE pubkey = $1", pubkey))


async def test_an_origin_rule_refuses_a_key_or_session_from_another_site_but_not_the_wallet(
    gateway: RunningGateway, http: aiohttp.ClientSession, owner: Owner, db: asyncpg.Connection, recorded: Recorded
) -> None:
    put = await owner.put_rules(http, {"origins": ["https://app.example.com", "https://*.example.org"]})
    assert put.status == 200, put
    assert put.json["origins"] == ["https://app.example.com", "https://*.example.org"]
    for name, credential in owner.credentials().items():
        refused = await rpc(http, gateway.url, {**credential, "Origin": "https://evil.example.net"})
        denied(refused, "origin")
        info = await request(
            http, "GET", gateway.url + "/account/info", headers={**credential, "Origin": "https://x.com"}
        )
        denied(info, "origin")
        assert info.code == "ACCESS_DENIED"
        own = gateway.url  # the gateway's own page (same origin), and no Origin at all (not a browser)
        for origin in ("https://app.example.com", "https://a.b.example.org", own, None):
            headers = credential if origin is None else {**credential, "Origin": origin}
            assert (await rpc(http, gateway.url, headers)).status == 200, (name, origin)
        apex = await rpc(http, gateway.url, {**credential, "Origin": "https://example.org"})
        denied(apex, "origin")  # a wildcard names subdomains, not the domain itself
    wallet = {**owner.wallet("POST", "/", BODY), "Origin": "https://evil.example.net"}
    assert (await rpc(http, gateway.url, wallet)).status == 200  # the owner is never refused by the rules
    assert await usage_rows(gateway, db, owner.signer.pubkey) == 9  # 4 + 4 allowed calls and the wallet's
    refusals = sum(n for (metric, labels), n in recorded.counts.items() if metric == "gateway_access_refusals_total")
    assert refusals == 6, recorded.counts


async def test_the_gateways_own_origin_is_its_configured_one_never_the_host_header(
    gateway: RunningGateway, settings: Settings, http: aiohttp.ClientSession, owner: Owner, db: asyncpg.Connection
) -> None:
    """A DNS-rebinding page (a name of the attacker's resolving to a plain-HTTP gateway) sends its own name
    as both Origin and Host: an origin rule refuses it, where comparing the two once let it spend the key."""
    put = await owner.put_rules(http, {"origins": ["https://app.example.com"]})
    assert put.status == 200, put
    port = settings.port  # the gateway serves on its settings' port, as gateway up's does
    rebound = {"Host": f"evil.example:{port}"}
    for name, credential in owner.credentials().items():
        for origin in ("http://evil.example", f"http://evil.example:{port}"):
            denied(await rpc(http, gateway.url, {**credential, "Origin": origin, "Host": origin[7:]}), "origin")
        # its same-origin GET carries no Origin: the Host is the gateway's own only when configured so
        info = gateway.url + "/account/info"
        same_origin = {**credential, "Sec-Fetch-Site": "same-origin"}
        denied(await request(http, "GET", info, headers={**same_origin, **rebound}), "without an Origin")
        assert (await request(http, "GET", info, headers=same_origin)).status == 200, name  # the /app/ page's
        # make up's own page at any of this machine's names for the port: never refused
        for own in (f"http://127.0.0.1:{port}", f"http://localhost:{port}", f"http://[::1]:{port}"):
            assert (await rpc(http, gateway.url, {**credential, "Origin": own, **rebound})).status == 200, own
        denied(await rpc(http, gateway.url, {**credential, "Origin": f"http://127.0.0.1:{port + 1}"}), "origin")
    assert await usage_rows(gateway, db, owner.signer.pubkey) == 6  # the own origins' calls alone were billed


async def test_an_address_rule_refuses_a_key_or_session_from_another_address_but_not_the_wallet(
    gateway: RunningGateway,
    http: aiohttp.ClientSession,
    other_address: aiohttp.ClientSession,
    owner: Owner,
    db: asyncpg.Connection,
) -> None:
    put = await owner.put_rules(http, {"addresses": ["127.0.0.2", "10.0.0.0/8", "2001:db8::/32"]})
    assert put.status == 200, put
    assert put.json["addresses"] == ["127.0.0.2/32", "10.0.0.0/8", "2001:db8::/32"]
    for credential in owner.credentials().values():
        denied(await rpc(http, gateway.url, credential), "127.0.0.1")  # this test's own address
        assert (await rpc(other_address, gateway.url, credential)).status == 200  # from 127.0.0.2
        bulk = await request(
            http, "POST", gateway.url + "/bulk/getBalances", body=b'{"addresses":[]}', headers=credential
        )
        denied(bulk, "address")
    assert (await rpc(http, gateway.url, owner.wallet("POST", "/", BODY))).status == 200  # a wrong CIDR: the owner
    assert await usage_rows(gateway, db, owner.signer.pubkey) == 3


async def test_a_method_rule_refuses_other_methods_per_item_and_on_the_bulk_and_relay_routes(
    gateway: RunningGateway, http: aiohttp.ClientSession, owner: Owner, db: asyncpg.Connection
) -> None:
    put = await owner.put_rules(http, {"methods": ["getSlot", "READ_MEDIUM"]})
    assert put.status == 200, put
    batch = b"[" + BODY + b"," + BALANCE + b"]"
    for credential in owner.credentials().values():
        denied(await rpc(http, gateway.url, credential, BALANCE), "getBalance")
        assert (await rpc(http, gateway.url, credential)).status == 200
        answers = await rpc(http, gateway.url, credential, batch)
        assert answers.status == 200, answers
        assert isinstance(answers.json[0]["result"], int)
        assert answers.json[1]["error"]["code"] == ACCESS_DENIED_RPC, answers
        bulk = await request(
            http, "POST", gateway.url + "/bulk/getBalances", body=b'{"addresses":[]}', headers=credential
        )
        denied(bulk, "getBalance")
        relay = await request(http, "GET", gateway.url + "/relay/getTipAccounts", headers=credential)
        denied(relay, "getTipAccounts")
    wallet = await rpc(http, gateway.url, owner.wallet("POST", "/", BALANCE), BALANCE)
    assert wallet.status == 200 and "result" in wallet.json, wallet
    assert await usage_rows(gateway, db, owner.signer.pubkey) == 5  # getSlot twice, each batch's getSlot, the wallet's


async def test_only_the_wallet_changes_the_rules_any_credential_reads_them(
    gateway: RunningGateway, http: aiohttp.ClientSession, owner: Owner
) -> None:
    rules = {"addresses": ["127.0.0.2"], "methods": ["getSlot"]}
    assert (await owner.put_rules(http, rules)).status == 200
    lift = orjson.dumps({})
    for credential in owner.credentials().values():
        attempt = await request(http, "POST", gateway.url + "/account/access", body=lift, headers=credential)
        assert (attempt.status, attempt.code) == (401, "AUTH_FAILED"), attempt  # a leaked key cannot lift its rules
    for credential in owner.credentials().values():
        read = await request(http, "GET", gateway.url + "/account/access", headers=credential)
        denied(read, "address")  # bound like every other use of the key from here
    signed_read = owner.wallet("GET", "/account/access", b"")
    read = await request(http, "GET", gateway.url + "/account/access", headers=signed_read)
    assert read.status == 200, read
    assert read.json["addresses"] == ["127.0.0.2/32"] and read.json["methods"] == ["getSlot"]
    assert read.json["binds"] == ["api_key", "session"]
    cleared = await owner.put_rules(http, {})
    assert cleared.status == 200 and cleared.json["addresses"] == [], cleared
    for credential in owner.credentials().values():
        read = await request(http, "GET", gateway.url + "/account/access", headers=credential)
        assert read.status == 200 and read.json["pubkey"] == owner.signer.pubkey, read


@pytest.mark.parametrize(
    ("rules", "words"),
    [
        ({"addresses": ["10.0.0.1/8"]}, "not an IP address or CIDR range"),
        ({"addresses": ["example.com"]}, "not an IP address or CIDR range"),
        ({"methods": ["getFoo"]}, "not a method of this gateway"),
        ({"methods": ["DENIED"]}, "not a method of this gateway"),
        ({"origins": ["https://app.example.com/path"]}, "nothing after it"),
        ({"origins": ["ftp://app.example.com"]}, "must be http(s)"),
        ({"origins": ["https://exa mple.com"]}, "not a host name"),
        ({"origins": [f"https://a{i}.example.com" for i in range(33)]}, "at most 32 entries"),
        ({"origins": "https://app.example.com"}, "must be an array of strings"),
        ({"origins": ["x" * 300]}, "1 to 253 characters"),
        ({"rates": 5}, "unknown field 'rates'"),
        ({"webhooks": ["read"]}, "not a webhook action"),
        ({"webhooks": ["list"] * 9}, "at most 8 entries"),
        ([], "JSON object"),
    ],
)
async def test_bad_rules_are_refused_400_with_the_reason(
    gateway: RunningGateway, http: aiohttp.ClientSession, owner: Owner, rules: Any, words: str
) -> None:
    answer = await owner.put_rules(http, rules)
    assert (answer.status, answer.code) == (400, "INVALID_REQUEST"), answer
    assert words in answer.json["error"]["message"], answer
    read = await request(http, "GET", gateway.url + "/account/access", headers={"X-Api-Key": owner.key})
    assert read.json["origins"] == [] and read.json["addresses"] == [] and read.json["methods"] == []
    assert read.json["webhooks"] == []


async def test_mcp_is_bound_by_the_address_rule(
    gateway: RunningGateway, http: aiohttp.ClientSession, other_address: aiohttp.ClientSession, owner: Owner
) -> None:
    assert (await owner.put_rules(http, {"addresses": ["127.0.0.2"]})).status == 200
    init = orjson.dumps(
        {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "initialize",
            "params": {
                "protocolVersion": "2025-06-18",
                "capabilities": {},
                "clientInfo": {"name": "t", "version": "1"},
            },
        }
    )
    headers = {"X-Api-Key": owner.key, "Accept": "application/json, text/event-stream"}
    refused = await request(http, "POST", gateway.url + "/mcp", body=init, headers=headers)
    denied(refused, "address")
    allowed = await request(other_address, "POST", gateway.url + "/mcp", body=init, headers=headers)
    assert allowed.status == 200, allowed


async def test_the_rules_rate_bounds_the_key_and_sessions_together_not_the_wallet(
    gateway: RunningGateway, http: aiohttp.ClientSession, owner: Owner, db: asyncpg.Connection
) -> None:
    put = await owner.put_rules(http, {"rate": 2})
    assert put.status == 200 and put.json["rate"] == 2, put
    batch = b"[" + b",".join([BODY] * 5) + b"]"
    answers = await rpc(http, gateway.url, {"X-Api-Key": owner.key}, batch)  # a full bucket: burst = rate
    assert answers.status == 200, answers
    granted = [a for a in answers.json if "result" in a]
    refused = [a["error"] for a in answers.json if "error" in a]
    assert len(granted) == 2 and len(refused) == 3, answers
    assert {e["code"] for e in refused} == {-32005} and "access rules" in refused[0]["message"], refused
    answered = len(granted)
    for credential in owner.credentials().values():  # the key and the session share the bucket
        for _ in range(20):  # the bucket refills 2 a second: a slow machine may see a unit come back
            single = await rpc(http, gateway.url, credential)
            if single.status != 200:
                break
            answered += 1
        assert (single.status, single.code) == (429, -32005), single
        assert int(single.headers["retry-after"]) >= 1
    for _ in range(5):  # the owner is held to the account's rate only
        assert (await rpc(http, gateway.url, owner.wallet("POST", "/", BODY))).status == 200
    assert await usage_rows(gateway, db, owner.signer.pubkey) == answered + 5  # refused calls cost nothing


async def test_a_rate_must_be_a_positive_whole_number(
    gateway: RunningGateway, http: aiohttp.ClientSession, owner: Owner
) -> None:
    for rate in (0, -1, 1.5, True, "5", 100_001):
        answer = await owner.put_rules(http, {"rate": rate})
        assert (answer.status, answer.code) == (400, "INVALID_REQUEST"), (rate, answer)
    assert (await owner.put_rules(http, {"rate": None})).json["rate"] is None

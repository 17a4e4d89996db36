"""Webhook management (docs/api.md, Webhooks): the creation rules and their messages, create, list,
delete, rotate-secret, replay and resume, the cap, the 404 rule, and secrets never listed."""

from __future__ import annotations

import asyncio
import os
from typing import Any

import aiohttp
import asyncpg
import orjson
import pytest
from solders.keypair import Keypair

from gateway.core.errors import ProxyError
from gateway.signals.rules import KINDS
from gateway.webhooks.management import DEFAULT_MAX_WATCHED
from gateway.webhooks.models import WebhookCreated, WebhookList
from gateway.webhooks.rules import MAX_WEBHOOKS_PER_ACCOUNT
from gateway.webhooks.store import subscriptions as webhooks
from gateway.webhooks.validation import parse_creation, url_problem
from gateway_client import WalletSigner
from tests.auth.helpers import create_api_key, open_session, request, signed
from tests.credits.helpers import fund
from tests.support import RunningGateway
from tests.webhooks.conftest import WebhookClient
from tests.webhooks.support import spend

CALLER = str(WalletSigner(bytes(32)).pubkey)
SOMEONE = "Vote111111111111111111111111111111111111111"
HOOK = "https://hooks.example.com/in"

#: (body, a fragment of the 400's message): every refusal of the creation fields.
REFUSALS: list[tuple[Any, str]] = [
    ([], "body must be a JSON object"),
    ({"filter_type": "lifecycle", "lifecycle_events": ["low_balance"]}, "url is required"),
    ({"url": None, "filter_type": "signal"}, "url is required"),
    ({"url": 7, "filter_type": "signal"}, "url must be a string"),
    ({"url": HOOK}, "filter_type is required: one of account, program, my_account, lifecycle, signal"),
    ({"url": HOOK, "filter_type": "tx"}, "filter_type must be one of account, program, my_account, lifecycle, signal"),
    ({"url": HOOK, "filter_type": "signal", "extra": 1}, "unknown field 'extra'"),
    ({"url": HOOK, "filter_type": "signal", "signal_events": "newPair"}, "signal_events must be an array of strings"),
    (
        {"url": HOOK, "filter_type": "lifecycle", "lifecycle_events": [1]},
        "lifecycle_events must be an array of strings",
    ),
    ({"url": HOOK, "filter_type": "account", "filter_value": 5}, "filter_value must be a string"),
    ({"url": "ftp://hooks.example.com/", "filter_type": "signal"}, "url must start with https://"),
    ({"url": "https:///path", "filter_type": "signal"}, "url must name a host"),
    ({"url": "https://hooks.example.com:99999/", "filter_type": "signal"}, "url is not a valid URL"),
    ({"url": "https://hooks.example.com/a b", "filter_type": "signal"}, "url must not contain spaces"),
    ({"url": "https://h.example.com/" + "a" * 2048, "filter_type": "signal"}, "url must be at most 2048 characters"),
    ({"url": HOOK, "filter_type": "account"}, "filter_value is required for filter_type account"),
    ({"url": HOOK, "filter_type": "program", "filter_value": "nope"}, "filter_value must be a base58 public key"),
    ({"url": HOOK, "filter_type": "account", "filter_value": "1" * 44}, "filter_value must be a base58 public key"),
    ({"url": HOOK, "filter_type": "my_account", "filter_value": SOMEONE}, "must be your own public key"),
    (
        {"url": HOOK, "filter_type": "signal", "filter_value": SOMEONE},
        "filter_value is not used with filter_type signal",
    ),
    (
        {"url": HOOK, "filter_type": "lifecycle", "filter_value": SOMEONE, "lifecycle_events": ["low_balance"]},
        "filter_value is not used with filter_type lifecycle",
    ),
    ({"url": HOOK, "filter_type": "lifecycle"}, "lifecycle_events is required for filter_type lifecycle"),
    ({"url": HOOK, "filter_type": "lifecycle", "lifecycle_events": []}, "lifecycle_events is required"),
    (
        {"url": HOOK, "filter_type": "lifecycle", "lifecycle_events": ["low_balance", "tx.confirmed"]},
        "unknown lifecycle event 'tx.confirmed'",
    ),
    (
        {"url": HOOK, "filter_type": "signal", "lifecycle_events": ["low_balance"]},
        "lifecycle_events is only used with filter_type lifecycle",
    ),
    ({"url": HOOK, "filter_type": "signal", "signal_events": ["rugPull"]}, "unknown signal kind 'rugPull'"),
    (
        {"url": HOOK, "filter_type": "account", "filter_value": SOMEONE, "signal_events": ["newPair"]},
        "signal_events is only used with filter_type signal",
    ),
]


def refusal(body: Any, allow_private: bool = False) -> str:
    with pytest.raises(ProxyError) as refused:
        parse_creation(orjson.dumps(body), CALLER, allow_private)
    assert (refused.value.status, refused.value.constant) == (400, "INVALID_REQUEST")
    return refused.value.message


@pytest.mark.parametrize(("body", "message"), REFUSALS)
def test_each_refusal_names_the_field(body: Any, message: str) -> None:
    assert message in refusal(body)


def test_a_body_that_is_not_json_is_refused() -> None:
    with pytest.raises(ProxyError, match="body must be a JSON object"):
        parse_creation(b"{nope", CALLER, False)


@pytest.mark.parametrize(
    ("url", "why"),
    [
        ("http://hooks.example.com/", "https://: http:// is for development gateways only (set GATEWAY_WEBHOOK"),
        ("https://localhost/", "'localhost' is a loopback name"),
        ("https://api.localhost./", "a loopback name"),
        ("https://127.0.0.1:8443/", "a loopback address"),
        ("https://127.1/", "a loopback address"),
        ("https://2130706433/", "a loopback address"),
        ("https://0x7f.0.0.1/", "a loopback address"),
        ("https://[::1]/", "a loopback address"),
        ("https://[::ffff:10.0.0.1]/", "a private address"),
        ("https://10.1.2.3/", "a private address"),
        ("https://192.168.1.10/", "a private address"),
        ("https://169.254.169.254/latest/meta-data", "a cloud metadata address"),
        ("https://100.64.0.1/", "not a public address"),
        ("https://0.0.0.0/", "an unspecified address"),
    ],
)
def test_private_receivers_are_refused_unless_the_development_setting_allows_them(url: str, why: str) -> None:
    problem = url_problem(url, allow_private=False)
    assert problem is not None and why in problem
    assert url_problem(url, allow_private=True) is None


@pytest.mark.parametrize("url", [HOOK, "https://8.8.8.8/hook", "https://[2606:4700::1111]:8443/x?y=1", "HTTPS://A.io"])
def test_public_https_receivers_are_accepted(url: str) -> None:
    assert url_problem(url, allow_private=False) is None


def test_what_is_stored_for_each_filter_type() -> None:
    def parsed(**fields: Any) -> webhooks.NewWebhook:
        return parse_creation(orjson.dumps({"url": HOOK, **fields}), CALLER, False)

    assert parsed(filter_type="account", filter_value=SOMEONE).filter_value == SOMEONE
    assert parsed(filter_type="my_account").filter_value == CALLER  # absent: the caller's own key
    assert parsed(filter_type="my_account", filter_value=CALLER).filter_value == CALLER
    lifecycle = parsed(filter_type="lifecycle", lifecycle_events=["low_balance", "api_key.rotated", "low_balance"])
    assert lifecycle.lifecycle_events == ("low_balance", "api_key.rotated") and lifecycle.filter_value is None
    assert parsed(filter_type="signal").signal_events == KINDS  # absent: every kind
    assert parsed(filter_type="signal", signal_events=[]).signal_events == KINDS
    assert parsed(filter_type="signal", signal_events=["largeSwap", "largeSwap"]).signal_events == ("largeSwap",)
    assert parsed(filter_type="signal", filter_value=None, lifecycle_events=None).signal_events == KINDS


# ------------------------------------------------------------------------------------- over HTTP


async def test_every_refusal_is_a_400_with_the_spec_body(owner: WebhookClient) -> None:
    for body, message in REFUSALS:
        answer = await owner.call("POST", "/webhooks", body)
        assert answer.status == 400, (body, answer)
        assert answer.json["error"]["code"] == "INVALID_REQUEST" and message in answer.json["error"]["message"]
        assert answer.json["error"]["requestId"] == answer.headers["x-request-id"]
    assert await owner.listed() == []  # nothing was stored


async def test_create_answers_the_record_and_its_secret_once(owner: WebhookClient, database_url: str) -> None:
    created = await owner.created(
        url="http://127.0.0.1:9/in", filter_type="lifecycle", lifecycle_events=["low_balance"]
    )
    WebhookCreated.model_validate(created)
    assert created["secret"].startswith("whsec_") and len(created["secret"]) > 40
    assert created["status"] == "active" and created["paused_reason"] is None
    assert created["filter_value"] is None and created["lifecycle_events"] == ["low_balance"]
    assert created["deliveries"] == {"pending": 0, "delivered": 0, "dead": 0} and created["last_delivery"] is None
    pool = await asyncpg.create_pool(database_url, min_size=1, max_size=1)
    try:
        assert await webhooks.signing_secret(pool, created["id"]) == created["secret"]
        stored = await webhooks.get(pool, created["id"], owner.pubkey)
        assert stored is not None and stored.url == "http://127.0.0.1:9/in" and stored.pubkey == owner.pubkey
    finally:
        await pool.close()


async def test_the_listing_is_newest_first_and_never_shows_a_secret(owner: WebhookClient, other: WebhookClient) -> None:
    first = await owner.created(url=HOOK, filter_type="account", filter_value=SOMEONE)
    second = await owner.created(url=HOOK, filter_type="my_account")
    third = await owner.created(url=HOOK, filter_type="signal", signal_events=["newPair"])
    await other.created(url=HOOK, filter_type="signal")
    answer = await owner.call("GET", "/webhooks")
    assert answer.status == 200
    WebhookList.model_validate(answer.json)
    assert answer.json["max_webhooks"] == MAX_WEBHOOKS_PER_ACCOUNT
    assert answer.json["max_watched_addresses"] == DEFAULT_MAX_WATCHED
    listed = answer.json["webhooks"]
    assert [h["id"] for h in listed] == [third["id"], second["id"], first["id"]]
    assert listed[1]["filter_value"] == owner.pubkey and listed[0]["signal_events"] == ["newPair"]
    for secret in (first["secret"], second["secret"], third["secret"]):
        assert secret.encode() not in answer.raw
    assert all("secret" not in h for h in listed)
    assert listed[2] == {k: v for k, v in first.items() if k != "secret"}


async def test_every_credential_mode_reaches_the_routes(gateway: RunningGateway, http: aiohttp.ClientSession) -> None:
    owner = await WebhookClient.new(http, gateway)
    body = orjson.dumps({"url": HOOK, "filter_type": "my_account"})
    by_wallet = await signed(http, owner.signer, "POST", gateway.url, "/webhooks", body)
    assert by_wallet.status == 201, by_wallet
    token = await open_session(http, owner.signer, gateway.url)
    by_session = await request(http, "GET", gateway.url + "/webhooks", headers={"Authorization": f"Bearer {token}"})
    assert by_session.status == 200 and [h["id"] for h in by_session.json["webhooks"]] == [by_wallet.json["id"]]
    by_key_query = await request(http, "GET", gateway.url + "/webhooks", params={"api-key": owner.headers["X-Api-Key"]})
    assert by_key_query.status == 200 and len(by_key_query.json["webhooks"]) == 1


async def test_an_account_with_credits_is_needed(
    gateway: RunningGateway, http: aiohttp.ClientSession, db: asyncpg.Connection
) -> None:
    """No account: 402 -32002 with the payment terms. An account without credits: 402 -32010, in the
    JSON-RPC body every 402 has, with what it needs and the deposit terms: webhooks' deliveries are
    paid. One credit is enough, for every kind."""
    body = orjson.dumps({"url": HOOK, "filter_type": "signal"})
    anonymous = await request(http, "POST", gateway.url + "/webhooks", body=body)
    assert anonymous.status == 402 and anonymous.json["error"]["code"] == -32002
    stranger = WalletSigner(os.urandom(32))  # a valid signature, no account
    unknown = await signed(http, stranger, "POST", gateway.url, "/webhooks", body)
    assert unknown.status == 402 and unknown.json["error"]["code"] == -32002

    await create_api_key(http, stranger, gateway.url)  # an account, no credits (this replica hears of it)
    for kind in ({"filter_type": "signal"}, {"filter_type": "my_account"}, unwatched()):
        broke = await signed(http, stranger, "POST", gateway.url, "/webhooks", orjson.dumps({"url": HOOK, **kind}))
        assert broke.status == 402, broke
        error = broke.json["error"]
        assert error["code"] == -32010 and "creating a webhook needs a positive balance" in error["message"]
        assert error["data"]["required"] == 1 and error["data"]["available"] == 0
        assert error["data"]["deposit_address"] and broke.json["jsonrpc"] == "2.0"
    assert await db.fetchval("SELECT count(*) FROM webhooks WHERE pubkey = $1", stranger.pubkey) == 0

    await fund(gateway_pool(gateway), stranger.pubkey, 1)
    assert (await signed(http, stranger, "POST", gateway.url, "/webhooks", body)).status == 201


async def test_an_account_watches_at_most_so_many_addresses(owner: WebhookClient) -> None:
    """Distinct addresses over the account's watches (my_account is its own key); concurrent creations
    cannot pass the cap together; other kinds and another watch of an address already watched are not
    counted; a deleted watch frees its address."""
    cap = DEFAULT_MAX_WATCHED
    mine = await owner.created(url=HOOK, filter_type="my_account")
    answers = await asyncio.gather(*(owner.create(**unwatched()) for _ in range(cap + 2)))
    assert sorted(a.status for a in answers) == [201] * (cap - 1) + [400] * 3
    refused = next(a for a in answers if a.status == 400).json["error"]
    assert refused["code"] == "INVALID_REQUEST"
    assert refused["message"] == (
        f"this account's webhooks watch {cap} addresses, the most one account may watch: "
        "delete a watch of another address first"
    )
    watched = next(a.json for a in answers if a.status == 201)
    again = {"url": HOOK, "filter_type": watched["filter_type"], "filter_value": watched["filter_value"]}
    assert (await owner.create(**again)).status == 201  # an address already watched
    assert (await owner.create(url=HOOK, filter_type="program", filter_value=owner.pubkey)).status == 201  # its key
    assert (await owner.create(url=HOOK, filter_type="signal")).status == 201
    assert (await owner.create(**unwatched())).status == 400
    listing = await owner.call("GET", "/webhooks")
    assert listing.json["max_watched_addresses"] == cap
    assert (await owner.delete(mine["id"])).status == 200  # its address is still watched by the program one
    assert (await owner.create(**unwatched())).status == 400
    alone = [a.json for a in answers if a.status == 201][1]  # the only watch of its address
    assert (await owner.delete(alone["id"])).status == 200
    assert (await owner.create(**unwatched())).status == 201
    assert (await owner.create(**unwatched())).status == 400


async def test_delete_cancels_what_was_not_delivered(owner: WebhookClient, db: asyncpg.Connection) -> None:
    hook = await owner.created(**unwatched())
    kept = await owner.created(**unwatched())
    jobs = await add_jobs(db, hook["id"], ["pending", "delivering", "delivered", "dead"])
    untouched = await add_jobs(db, kept["id"], ["pending"])
    answer = await owner.delete(hook["id"])
    assert answer.status == 200 and answer.json == {"ok": True, "id": hook["id"], "cancelled_jobs": 2}
    assert await job_statuses(db, jobs) == ["cancelled", "cancelled", "delivered", "dead"]
    assert await job_statuses(db, untouched) == ["pending"]
    assert [h["id"] for h in await owner.listed()] == [kept["id"]]
    row = await db.fetchrow("SELECT status, deleted_at FROM webhooks WHERE id = $1", hook["id"])
    assert row["status"] == "deleted" and row["deleted_at"] is not None  # soft: the record stays
    again = await owner.delete(hook["id"])
    assert again.status == 404 and again.json["error"]["code"] == "NOT_FOUND"
    for action in ("rotate-secret", "replay", "resume"):  # a deleted webhook is gone for every route
        assert (await owner.action(hook["id"], action)).status == 404


async def test_the_listing_counts_deliveries_and_shows_the_last(owner: WebhookClient, db: asyncpg.Connection) -> None:
    hook = await owner.created(**unwatched())
    await add_jobs(db, hook["id"], ["delivered", "delivered", "dead", "cancelled", "delivering"])
    last = (await add_jobs(db, hook["id"], ["pending"], attempts=2, http_status=503, error="503 from receiver"))[0]
    await add_jobs(db, hook["id"], ["pending"], attempts=0)  # never attempted yet: not the last delivery
    (listed,) = await owner.listed()
    assert listed["deliveries"] == {"pending": 3, "delivered": 2, "dead": 1}
    shown = listed["last_delivery"]
    assert shown["event_id"] == f"evt_{hook['id']}_{last}" and shown["status"] == "pending"
    assert (shown["attempts"], shown["http_status"], shown["error"]) == (2, 503, "503 from receiver")
    assert shown["event_type"] == "signal.newPair" and shown["delivered_at"] is None


async def test_rotate_secret_replaces_the_signing_secret(owner: WebhookClient, database_url: str) -> None:
    hook = await owner.created(url=HOOK, filter_type="signal")
    answer = await owner.action(hook["id"], "rotate-secret")
    assert answer.status == 200 and set(answer.json) == {"secret"}
    secret = answer.json["secret"]
    assert secret.startswith("whsec_") and secret != hook["secret"]
    pool = await asyncpg.create_pool(database_url, min_size=1, max_size=1)
    try:
        assert await webhooks.signing_secret(pool, hook["id"]) == secret
    finally:
        await pool.close()
    (listed,) = await owner.listed()
    assert listed["secret_rotated_at"] is not None and secret.encode() not in orjson.dumps(listed)
    assert (await owner.call("POST", f"/webhooks/{hook['id']}/rotate-secret", raw=b"")).status == 200  # no body: {}
    refused = await owner.action(hook["id"], "rotate-secret", {"secret": "mine"})
    assert refused.status == 400 and "unknown field 'secret'" in refused.json["error"]["message"]


async def test_replay_moves_dead_jobs_back_to_pending(owner: WebhookClient, db: asyncpg.Connection) -> None:
    hook = await owner.created(**unwatched())
    jobs = await add_jobs(db, hook["id"], ["dead", "dead", "delivered", "cancelled"], attempts=8)
    answer = await owner.action(hook["id"], "replay")
    assert answer.status == 200 and answer.json == {"ok": True, "id": hook["id"], "replayed": 2}
    rows = await db.fetch(
        "SELECT status, attempts, next_attempt_at <= now() AS due FROM delivery_jobs WHERE id = ANY($1) ORDER BY id",
        jobs,
    )
    assert [(r["status"], r["attempts"], r["due"]) for r in rows[:2]] == [("pending", 0, True)] * 2
    assert [(r["status"], r["attempts"]) for r in rows[2:]] == [("delivered", 8), ("cancelled", 8)]
    assert (await owner.action(hook["id"], "replay")).json["replayed"] == 0


async def test_resume_unpauses_and_makes_waiting_jobs_due(
    owner: WebhookClient, db: asyncpg.Connection, database_url: str
) -> None:
    hook = await owner.created(url=HOOK, filter_type="signal")
    not_paused = await owner.action(hook["id"], "resume")
    assert not_paused.status == 200 and not_paused.json["resumed"] is False
    pool = await asyncpg.create_pool(database_url, min_size=1, max_size=1)
    try:
        assert await webhooks.pause(pool, hook["id"], "a signal delivery could not be paid: no credits")
        assert not await webhooks.pause(pool, hook["id"], "again")  # paused already
    finally:
        await pool.close()
    (job,) = await add_jobs(db, hook["id"], ["pending"], due_in_s=3600)
    (listed,) = await owner.listed()
    assert listed["status"] == "paused" and "could not be paid" in listed["paused_reason"]
    answer = await owner.action(hook["id"], "resume")
    assert answer.status == 200
    assert answer.json == {"ok": True, "id": hook["id"], "resumed": True, "status": "active"}
    (listed,) = await owner.listed()
    assert listed["status"] == "active" and listed["paused_reason"] is None
    assert await db.fetchval("SELECT next_attempt_at <= now() FROM delivery_jobs WHERE id = $1", job)


async def test_another_accounts_webhook_is_not_found_on_every_route(
    owner: WebhookClient, other: WebhookClient, db: asyncpg.Connection
) -> None:
    hook = await owner.created(url=HOOK, filter_type="signal")
    (dead,) = await add_jobs(db, hook["id"], ["dead"])
    await db.execute("UPDATE webhooks SET status = 'paused', paused_reason = 'test' WHERE id = $1", hook["id"])
    unknown = hook["id"] + 1_000_000
    for target in (hook["id"], unknown, "abc", "0", "-1", str(2**63), "1e3"):
        answers = [
            await other.delete(target),
            *[await other.action(target, action) for action in ("rotate-secret", "replay", "resume")],
        ]
        for answer in answers:
            assert answer.status == 404, (target, answer)
            assert answer.json["error"] == {
                "code": "NOT_FOUND",
                "message": "no such webhook on this account",
                "requestId": answer.headers["x-request-id"],
            }
    (listed,) = await owner.listed()  # and nothing changed
    assert listed["status"] == "paused"
    assert await job_statuses(db, [dead]) == ["dead"]
    assert await db.fetchval("SELECT secret FROM webhooks WHERE id = $1", hook["id"]) == hook["secret"]


async def test_the_cap_holds_under_concurrent_creations(owner: WebhookClient) -> None:
    body = {"url": HOOK, "filter_type": "signal"}
    answers = await asyncio.gather(*(owner.create(**body) for _ in range(MAX_WEBHOOKS_PER_ACCOUNT + 5)))
    assert sorted(a.status for a in answers) == [201] * MAX_WEBHOOKS_PER_ACCOUNT + [400] * 5
    refused = next(a for a in answers if a.status == 400)
    assert refused.json["error"]["code"] == "INVALID_REQUEST"
    assert f"this account has {MAX_WEBHOOKS_PER_ACCOUNT} webhooks" in refused.json["error"]["message"]
    listed = await owner.listed()
    assert len(listed) == MAX_WEBHOOKS_PER_ACCOUNT
    assert (await owner.delete(listed[-1]["id"])).status == 200  # deleted ones do not count
    assert (await owner.create(**body)).status == 201
    assert (await owner.create(**body)).status == 400


# ------------------------------------------------------------------------------------------ helpers


def gateway_pool(gateway: RunningGateway) -> asyncpg.Pool:
    pool = gateway.app.conn.db
    assert pool is not None
    return pool


def unwatched() -> dict[str, Any]:
    """Creation fields of a webhook no source fires for (a new address nobody uses): the tests that
    count jobs see only the ones they added."""
    return {"url": HOOK, "filter_type": "account", "filter_value": str(Keypair().pubkey())}


async def add_jobs(
    db: asyncpg.Connection,
    webhook_id: int,
    statuses: list[str],
    *,
    attempts: int = 1,
    http_status: int | None = None,
    error: str | None = None,
    due_in_s: float = 0,
) -> list[int]:
    """Delivery jobs in these statuses, as the sources and the dispatcher leave them."""
    ids = []
    for status in statuses:
        ids.append(
            await db.fetchval(
                """INSERT INTO delivery_jobs (webhook_id, event_type, payload, status, attempts, last_status,
                       last_error, next_attempt_at, delivered_at)
                   VALUES ($1, 'signal.newPair', '{}', $2, $3, $4, $5, now() + make_interval(secs => $6),
                           CASE WHEN $2 = 'delivered' THEN now() END)
                   RETURNING id""",
                webhook_id,
                status,
                attempts,
                http_status,
                error,
                due_in_s,
            )
        )
    return ids


async def job_statuses(db: asyncpg.Connection, ids: list[int]) -> list[str]:
    rows = await db.fetch("SELECT status FROM delivery_jobs WHERE id = ANY($1) ORDER BY id", ids)
    return [r["status"] for r in rows]


async def test_replay_and_resume_need_credits_and_are_bounded_per_account(
    gateway: RunningGateway, http: aiohttp.ClientSession, owner: WebhookClient, other: WebhookClient
) -> None:
    """Replays and resumes are free and make deliveries due again: an account without credits gets 402
    for them, as for a creation, and one account gets 10 a minute (429 with Retry-After past them),
    whatever another account does."""
    hook = await owner.created(url=HOOK, filter_type="my_account")
    theirs = await other.created(url=HOOK, filter_type="my_account")
    for n in range(10):
        answer = await owner.action(hook["id"], "resume" if n % 2 else "replay")
        assert answer.status == 200, (n, answer)
    refused = await owner.action(hook["id"], "resume")
    assert (refused.status, refused.json["error"]["code"]) == (429, "RATE_LIMITED"), refused
    retry_after = {k.lower(): v for k, v in refused.headers.items()}["retry-after"]
    assert 1 <= int(retry_after) <= 60
    assert "10 a minute per account" in refused.json["error"]["message"]
    assert (await other.action(theirs["id"], "replay")).status == 200  # another account's own count

    db = gateway.app.conn.db
    assert db is not None
    await spend(db, other.pubkey, await db.fetchval("SELECT balance FROM accounts WHERE pubkey = $1", other.pubkey))
    unfunded = await other.action(theirs["id"], "resume")
    assert (unfunded.status, unfunded.json["error"]["code"]) == (402, -32010), unfunded

"""``GET /webhooks/{id}/deliveries`` and ``POST /webhooks/{id}/pause`` (docs/api.md, Webhooks; beyond
the interface): a webhook's events with the receiver's last answer, and its owner's pause, which keeps
its queued deliveries queued and their charges (issue 49: only a delivery never sent is refunded, and
only when it is cancelled).

Real parts throughout: the module's own PostgreSQL database, a dispatcher in this process, a real
receiver on 127.0.0.1, and a gateway in this process on the same database for the routes. Waits end on
what the database shows; their limits only bound a hang.
"""

from __future__ import annotations

from typing import Any

import aiohttp
import asyncpg

from gateway.webhooks.dispatcher import fixed_delays
from gateway.webhooks.store.subscriptions import OWNER_PAUSED_REASON
from tests.support import RunningGateway
from tests.webhooks.conftest import STARTING_CREDITS, WebhookClient
from tests.webhooks.support import (
    Answer,
    Hook,
    Receiver,
    balance,
    conserved,
    dispatching,
    enqueue,
    eventually,
    job,
    ledger,
)


def event(hook_id: int, job_id: int) -> str:
    return f"evt_{hook_id}_{job_id}"


async def deliveries(client: WebhookClient, hook_id: int, query: str = "") -> list[dict[str, Any]]:
    answer = await client.call("GET", f"/webhooks/{hook_id}/deliveries{query}")
    assert answer.status == 200, answer
    assert answer.json["id"] == hook_id
    entries: list[dict[str, Any]] = answer.json["entries"]
    return entries


async def test_deliveries_show_the_receivers_answers_and_a_pause_keeps_the_queue(
    pool: asyncpg.Pool, receiver: Receiver, gateway_here: RunningGateway, http: aiohttp.ClientSession
) -> None:
    """Two paid signal deliveries: the receiver answers the first 500 (a retry an hour away), then 200;
    the second 404 (final: dead). The listing shows each with its status, attempts, HTTP status and the
    answer's text. Paused by its owner, the webhook keeps the waiting delivery pending and charged (it was
    sent: no refund), and one queued while paused is parked, uncharged; the resume sends both."""
    owner = await WebhookClient.new(http, gateway_here)
    hook_id = (await owner.created(url=receiver.url, filter_type="signal"))["id"]
    hook = Hook(hook_id, owner.pubkey, "")
    retried = await enqueue(pool, hook, price=1)
    refused = await enqueue(pool, hook, price=1)
    receiver.script[event(hook_id, retried)] = [Answer(500, "<b>busy</b>"), Answer(200, "ok")]
    receiver.script[event(hook_id, refused)] = [Answer(404, "no such hook")]

    async def first_answers() -> bool:
        a, b = await job(pool, retried), await job(pool, refused)
        return (a["status"], a["attempts"], b["status"]) == ("pending", 1, "dead")

    async with dispatching(pool, retry=fixed_delays([3600])):
        await eventually(first_answers, "the first answered 500 (retry in an hour), the second 404 (dead)")
        listed = await deliveries(owner, hook_id)
        assert [e["event_id"] for e in listed] == [event(hook_id, refused), event(hook_id, retried)]
        dead, waiting = listed
        assert (dead["status"], dead["attempts"], dead["http_status"], dead["response_excerpt"]) == (
            "dead",
            1,
            404,
            "no such hook",
        )
        assert dead["event_type"] == "signal.newPair" and dead["next_attempt_at"] is None
        assert dead["last_attempt_at"] is not None and dead["last_attempt_at"] >= dead["created_at"]
        assert (waiting["status"], waiting["attempts"], waiting["http_status"], waiting["response_excerpt"]) == (
            "pending",
            1,
            500,
            "<b>busy</b>",
        )
        assert waiting["next_attempt_at"] is not None and waiting["delivered_at"] is None
        assert waiting["next_attempt_at"] > waiting["last_attempt_at"] >= waiting["created_at"]

        # Paged by key: one at a time, the cursor naming the last one shown.
        first = await owner.call("GET", f"/webhooks/{hook_id}/deliveries?limit=1")
        assert first.status == 200 and [e["event_id"] for e in first.json["entries"]] == [dead["event_id"]]
        assert first.json["next_cursor"] == str(refused)
        second = await deliveries(owner, hook_id, f"?limit=1&cursor={first.json['next_cursor']}")
        assert [e["event_id"] for e in second] == [waiting["event_id"]]
        assert await deliveries(owner, hook_id, f"?cursor={retried}") == []

        paused = await owner.action(hook_id, "pause")
        assert paused.status == 200 and paused.json == {"ok": True, "id": hook_id, "paused": True, "status": "paused"}
        again = await owner.action(hook_id, "pause")
        assert again.status == 200 and again.json["paused"] is False
        (shown,) = await owner.listed()
        assert (shown["status"], shown["paused_reason"]) == ("paused", OWNER_PAUSED_REASON % hook_id)
        # The waiting delivery was sent (the receiver answered it): it stays queued and charged.
        row = await job(pool, retried)
        assert (row["status"], row["charged"], row["sent"]) == ("pending", 1, True)
        assert [kind for kind, _, ref in await ledger(pool, owner.pubkey) if ref and ref.startswith("delivery:")] == [
            "debit",
            "debit",
        ]
        assert await balance(pool, owner.pubkey) == STARTING_CREDITS - 2

        queued = await enqueue(pool, hook, price=1)

        async def parked() -> bool:
            return bool(
                await pool.fetchval("SELECT next_attempt_at = 'infinity' FROM delivery_jobs WHERE id = $1", queued)
            )

        await eventually(parked, "the delivery queued while paused parked by the claim")
        row = await job(pool, queued)
        assert (row["status"], row["attempts"], row["charged"]) == ("pending", 0, 0)
        newest = (await deliveries(owner, hook_id))[0]
        assert newest["event_id"] == event(hook_id, queued) and newest["last_attempt_at"] is None
        assert (newest["status"], newest["attempts"], newest["http_status"], newest["next_attempt_at"]) == (
            "pending",
            0,
            None,
            None,
        )

        resumed = await owner.action(hook_id, "resume")
        assert resumed.status == 200 and resumed.json["resumed"] is True

        async def both_delivered() -> bool:
            return {(await job(pool, j))["status"] for j in (retried, queued)} == {"delivered"}

        await eventually(both_delivered, "the waiting and the parked delivery made once resumed")

    by_id = {e["event_id"]: e for e in await deliveries(owner, hook_id)}
    done = by_id[event(hook_id, retried)]
    assert (done["status"], done["attempts"], done["http_status"], done["response_excerpt"]) == (
        "delivered",
        2,
        200,
        "ok",
    )
    assert done["delivered_at"] is not None and done["next_attempt_at"] is None
    assert done["last_attempt_at"] > waiting["last_attempt_at"]  # the second attempt's
    assert by_id[event(hook_id, queued)]["status"] == "delivered"
    assert receiver.events()[event(hook_id, retried)] == 2 and receiver.events()[event(hook_id, queued)] == 1
    assert await balance(pool, owner.pubkey) == STARTING_CREDITS - 3 and await conserved(pool, owner.pubkey)


async def test_only_the_owner_lists_or_pauses_and_bad_parameters_are_refused(
    owner: WebhookClient, other: WebhookClient
) -> None:
    """Another account's webhook, an unknown id and ids that are no id are 404 NOT_FOUND on both routes;
    a limit or cursor out of bounds, or a pause with a body, is 400 INVALID_REQUEST: never a 500."""
    hook_id = (await owner.created(url="http://127.0.0.1:9/hook", filter_type="signal"))["id"]
    for path in (
        f"/webhooks/{hook_id}",
        f"/webhooks/{hook_id + 10**6}",
        "/webhooks/0",
        "/webhooks/-1",
        "/webhooks/abc",
        "/webhooks/" + "9" * 5000,
    ):
        client = other if path == f"/webhooks/{hook_id}" else owner
        for method, action in (("GET", "/deliveries"), ("POST", "/pause")):
            answer = await client.call(method, path + action, {} if method == "POST" else None)
            assert answer.status == 404 and answer.code == "NOT_FOUND", (path, action, answer)
    (listed,) = await owner.listed()
    assert listed["status"] == "active"  # the other account's pause did nothing

    for query in (
        "limit=0",
        "limit=101",
        "limit=x",
        "limit=" + "1" * 5000,
        "cursor=0",
        "cursor=-1",
        "cursor=" + "9" * 5000,
    ):
        answer = await owner.call("GET", f"/webhooks/{hook_id}/deliveries?{query}")
        assert answer.status == 400 and answer.code == "INVALID_REQUEST", (query, answer)
    answer = await owner.call("GET", f"/webhooks/{hook_id}/deliveries?limit=100")
    assert answer.status == 200 and answer.json == {"id": hook_id, "entries": [], "next_cursor": None}

    answer = await owner.action(hook_id, "pause", {"reason": "mine"})
    assert answer.status == 400 and answer.code == "INVALID_REQUEST", answer
    answer = await owner.call("POST", f"/webhooks/{hook_id}/pause")  # no body: as {}
    assert answer.status == 200 and answer.json["paused"] is True

"""Webhook management under the access rules (docs/api.md, "Access rules" and "Webhooks"), through the
real stack: a key or session of an account with any rule takes only the webhook actions its ``webhooks``
list names (none by default), refused 403 ACCESS_DENIED with nothing changed; the wallet's own signature
manages them all; an account without rules manages them with any credential; a change binds the next call."""

from __future__ import annotations

from typing import Any

import aiohttp
import orjson

from gateway.access.rules import WEBHOOK_ACTIONS
from tests.access.conftest import Owner
from tests.access.test_access_http import denied
from tests.auth.helpers import Answer, request
from tests.support import RunningGateway

HOOK = orjson.dumps(
    {"url": "https://hooks.example.com/in", "filter_type": "lifecycle", "lifecycle_events": ["low_balance"]}
)


def action_request(action: str, hook_id: int) -> tuple[str, str, bytes]:
    """The method, path and body of each webhook action on the webhook ``hook_id``."""
    each = {
        "create": ("POST", "/webhooks", HOOK),
        "list": ("GET", "/webhooks", b""),
        "delete": ("DELETE", f"/webhooks/{hook_id}", b""),
        "pause": ("POST", f"/webhooks/{hook_id}/pause", b"{}"),
        "resume": ("POST", f"/webhooks/{hook_id}/resume", b"{}"),
        "replay": ("POST", f"/webhooks/{hook_id}/replay", b"{}"),
        "rotate-secret": ("POST", f"/webhooks/{hook_id}/rotate-secret", b"{}"),
        "deliveries": ("GET", f"/webhooks/{hook_id}/deliveries", b""),
    }
    return each[action]


async def act(
    http: aiohttp.ClientSession, owner: Owner, action: str, hook_id: int, credential: dict[str, str] | None
) -> Answer:
    """One webhook action with ``credential``, or signed by the wallet when it is None."""
    method, path, body = action_request(action, hook_id)
    headers = owner.wallet(method, path, body) if credential is None else credential
    return await request(http, method, owner.base + path, body=body, headers=headers)


async def owner_view(http: aiohttp.ClientSession, owner: Owner) -> list[dict[str, Any]]:
    """The account's webhooks as the wallet's own signature lists them."""
    listed = await act(http, owner, "list", 0, None)
    assert listed.status == 200, listed
    hooks: list[dict[str, Any]] = listed.json["webhooks"]
    return hooks


async def created_by_wallet(http: aiohttp.ClientSession, owner: Owner) -> int:
    made = await act(http, owner, "create", 0, None)
    assert made.status == 201, made
    hook_id: int = made.json["id"]
    return hook_id


# The order every action can run in on one webhook, ending with its deletion.
IN_ORDER = ("list", "deliveries", "pause", "resume", "replay", "rotate-secret", "delete")


async def test_a_key_bound_by_rules_takes_no_webhook_action_and_changes_nothing(
    gateway: RunningGateway, http: aiohttp.ClientSession, owner: Owner
) -> None:
    hook_id = await created_by_wallet(http, owner)
    put = await owner.put_rules(http, {"methods": ["getBalance"]})
    assert put.status == 200 and put.json["webhooks"] == [], put
    before = await owner_view(http, owner)
    for name, credential in owner.credentials().items():
        for action in WEBHOOK_ACTIONS:
            refused = await act(http, owner, action, hook_id, credential)
            denied(refused, f"webhook action {action}")
            assert refused.code == "ACCESS_DENIED" and "secret" not in refused.json, (name, refused)
        # the interface's account reads stay open to every valid credential
        info = await request(http, "GET", owner.base + "/account/info", headers=credential)
        assert info.status == 200, info
    after = await owner_view(http, owner)
    assert after == before and len(after) == 1  # nothing created, deleted, paused or rotated
    assert after[0]["secret_rotated_at"] is None and after[0]["status"] == "active", after
    for action in ("create", *IN_ORDER):  # the wallet's own signature manages them all
        done = await act(http, owner, action, hook_id, None)
        assert done.status == (201 if action == "create" else 200), (action, done)
    assert [hook["id"] for hook in await owner_view(http, owner)] != [hook_id]


async def test_the_webhooks_list_allows_the_actions_it_names_from_the_next_call(
    gateway: RunningGateway, http: aiohttp.ClientSession, owner: Owner
) -> None:
    hook_id = await created_by_wallet(http, owner)
    put = await owner.put_rules(http, {"methods": ["getBalance"], "webhooks": ["list"]})
    assert put.status == 200 and put.json["webhooks"] == ["list"], put
    read = await request(http, "GET", owner.base + "/account/access", headers={"X-Api-Key": owner.key})
    assert read.json["webhooks"] == ["list"], read
    for credential in owner.credentials().values():
        listed = await act(http, owner, "list", hook_id, credential)
        assert listed.status == 200 and [h["id"] for h in listed.json["webhooks"]] == [hook_id], listed
        denied(await act(http, owner, "create", hook_id, credential), "webhook action create")
        denied(await act(http, owner, "rotate-secret", hook_id, credential), "webhook action rotate-secret")
    key = {"X-Api-Key": owner.key}
    # the key's rules are cached now; a change binds its very next call
    assert (await owner.put_rules(http, {"methods": ["getBalance"], "webhooks": ["create"]})).status == 200
    denied(await act(http, owner, "list", hook_id, key), "webhook action list")
    made = await act(http, owner, "create", hook_id, key)
    assert made.status == 201 and made.json["secret"], made
    assert (await owner.put_rules(http, {"methods": ["getBalance"]})).status == 200
    denied(await act(http, owner, "create", hook_id, key), "webhook action create")
    assert len(await owner_view(http, owner)) == 2


async def test_an_account_without_rules_manages_its_webhooks_with_its_key_and_session(
    gateway: RunningGateway, http: aiohttp.ClientSession, owner: Owner
) -> None:
    put = await owner.put_rules(http, {})
    assert put.status == 200 and put.json["webhooks"] == [], put
    for name, credential in owner.credentials().items():
        made = await act(http, owner, "create", 0, credential)
        assert made.status == 201 and made.json["secret"], (name, made)
        for action in IN_ORDER:
            done = await act(http, owner, action, made.json["id"], credential)
            assert done.status == 200, (name, action, done)
    assert await owner_view(http, owner) == []

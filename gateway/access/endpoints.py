"""``GET /account/access`` and ``POST /account/access``: an account's access rules (docs/api.md,
"Access rules"). Read with any credential; written only with the wallet's own signature (the route's
auth stage allows no other), so a leaked key or session cannot lift its own restrictions."""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from typing import Any

import orjson

from gateway.access import store
from gateway.access.guard import AccessGuard
from gateway.access.rules import AccessRules, RulesInvalid, parse_rules, rules_invalid
from gateway.access.spend_cap import requested_cap
from gateway.auth.account_views import spend_cap_document
from gateway.core.errors import account_not_found, invalid_request
from gateway.pipeline.stages import Call, Reply, json_reply
from gateway.storage.channels import Channel
from gateway.storage.errors import StoreUnavailable

log = logging.getLogger(__name__)


class AccessEndpoints:
    """Args:
    guard: the process's guard (its pool, and the change heard here at once).
    known_methods: the method names a rule may list (the registry's and the WebSocket subscriptions').
    channel: the ``REVOKED_KEYS`` channel, once Redis is open.
    """

    def __init__(self, guard: AccessGuard, known_methods: Iterable[str], channel: Callable[[], Channel | None]) -> None:
        self.guard = guard
        self.known = frozenset(known_methods)
        self.channel = channel

    async def read(self, call: Call) -> Reply:
        pubkey = call.authenticated().pubkey
        compiled = await self.guard.rules_of(pubkey)
        return json_reply(200, _document(pubkey, compiled.rules))

    async def write(self, call: Call) -> Reply:
        pubkey = call.authenticated().pubkey
        try:
            document = orjson.loads(call.body)
        except orjson.JSONDecodeError as exc:
            raise invalid_request("body must be a JSON object (valid UTF-8 JSON)") from exc
        try:
            rules = parse_rules(document, self.known)
        except RulesInvalid as exc:
            raise rules_invalid(str(exc)) from exc
        pool, channel = self.guard.pool, self.channel()
        if pool is None or channel is None:
            raise StoreUnavailable(store.WHAT)
        if not await store.save(pool, pubkey, rules):
            raise account_not_found()
        self.guard.changed(pubkey)
        try:
            await store.announce(channel, pubkey)
        except StoreUnavailable:  # saved: the other processes see it at their channel's resync
            log.error("could not announce the access rules change of %s", pubkey)
            raise
        return json_reply(200, _document(pubkey, rules))


class SpendCapEndpoints:
    """``GET /account/spend-cap`` (any credential) and ``POST /account/spend-cap`` (the wallet's own
    signature only): the account's daily spend cap (docs/api.md, "Spend cap").

    Args:
    pool: the database pool, once open.
    recall: the ``RECALL`` channel, once Redis is open: a new cap asks every process to give back its
        leases of the account, which were granted under the old one.
    """

    def __init__(self, pool: Callable[[], Any], recall: Callable[[], Channel | None]) -> None:
        self.pool = pool
        self.recall = recall

    async def read(self, call: Call) -> Reply:
        pubkey = call.authenticated().pubkey
        found = await store.spend_cap(self._pool(), pubkey)
        if found is None:
            raise account_not_found()
        return json_reply(200, {"ok": True, "pubkey": pubkey, **spend_cap_document(*found)})

    async def write(self, call: Call) -> Reply:
        pubkey = call.authenticated().pubkey
        try:
            document = orjson.loads(call.body)
        except orjson.JSONDecodeError as exc:
            raise invalid_request("body must be a JSON object (valid UTF-8 JSON)") from exc
        cap = requested_cap(document)
        found = await store.set_spend_cap(self._pool(), pubkey, cap)
        if found is None:
            raise account_not_found()
        channel = self.recall()
        if channel is None:
            raise StoreUnavailable(store.WHAT)
        await store.recall_leases(channel, pubkey)
        return json_reply(200, {"ok": True, "pubkey": pubkey, **spend_cap_document(*found)})

    def _pool(self) -> Any:
        pool = self.pool()
        if pool is None:
            raise StoreUnavailable(store.WHAT)
        return pool


def _document(pubkey: str, rules: AccessRules) -> dict[str, Any]:
    return {"ok": True, "pubkey": pubkey, **rules.document(), "binds": ["api_key", "session"]}

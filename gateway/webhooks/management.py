"""The webhook management routes as pipeline endpoints (``Call -> Reply``), behind the auth stage.

    POST   /webhooks                     create: 201 with the subscription and its secret (shown once)
    GET    /webhooks                     the caller's subscriptions, newest first, without secrets
    DELETE /webhooks/{id}                delete; its waiting deliveries are cancelled
    POST   /webhooks/{id}/rotate-secret  a new secret; deliveries made from now on are signed with it
    POST   /webhooks/{id}/replay         dead deliveries back to pending, from their first attempt
    POST   /webhooks/{id}/resume         a paused subscription active again
    POST   /webhooks/{id}/pause          an active subscription paused by its owner, its queue kept
    GET    /webhooks/{id}/deliveries     its events, newest first, with the receiver's last answer

Only the owner sees a subscription: any other id (another account's, a deleted one, one that never
existed, one that is not a number) is 404 ``NOT_FOUND``, never 403, so no answer says whether an id
exists. The creation fields are checked by :mod:`gateway.webhooks.validation`; then the account's
standing: without a positive balance a creation is 402 -32010 (deliveries are paid), and past a cap
(:data:`~gateway.webhooks.rules.MAX_WEBHOOKS_PER_ACCOUNT` webhooks, ``webhook_watched_addresses_per_account``
watched addresses) it is 400 INVALID_REQUEST naming the cap, like any request the caller must change.
Secrets are made by :func:`gateway.webhooks.rules.new_secret`, answered to the caller and stored,
never logged.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from datetime import datetime
from typing import Any

from gateway.auth.account_views import iso8601
from gateway.core.errors import ProxyError, ReplyStyle, address_rate_limited, invalid_request, not_found
from gateway.core.params import whole_number
from gateway.credits.errors import account_suspended, insufficient_credits
from gateway.pipeline.stages import Call, Reply, json_reply
from gateway.storage.connections import Pool
from gateway.storage.errors import StoreUnavailable
from gateway.webhooks.rules import MAX_WEBHOOKS_PER_ACCOUNT, MIN_BALANCE_TO_CREATE, event_id, new_secret
from gateway.webhooks.settings import WebhookSettings
from gateway.webhooks.store import subscriptions as webhooks
from gateway.webhooks.store.subscriptions import Delivery, DeliveryCounts, LastDelivery, Refusal, Refused, WebhookView
from gateway.webhooks.validation import parse_creation, parse_empty

PATH = "/webhooks"
#: Ids are PostgreSQL BIGSERIALs.
MAX_ID = 2**63 - 1
#: Deliveries per page of ``GET /webhooks/{id}/deliveries``: each carries up to 512 bytes of the answer.
DEFAULT_DELIVERIES = 20
MAX_DELIVERIES = 100
NO_DELIVERIES = DeliveryCounts(pending=0, delivered=0, dead=0)
#: Addresses an account's watches may follow when no setting says (the setting's default).
DEFAULT_MAX_WATCHED = WebhookSettings.model_fields["webhook_watched_addresses_per_account"].default
#: Replays and resumes one account may make a minute when no setting says (the setting's default).
DEFAULT_ACTIONS_PER_MINUTE = WebhookSettings.model_fields["webhook_actions_per_minute"].default
TopUp = Callable[[str | None], Mapping[str, Any]]


class WebhookEndpoints:
    """Args:
    pool: the PostgreSQL pool, once the replica has started (503 before).
    allow_private: the ``webhook_allow_private`` setting (http:// and private hosts, for development).
    max_watched: the ``webhook_watched_addresses_per_account`` setting.
    top_up: how to pay, for the 402 of an account without credits (the deposit terms).
    """

    def __init__(
        self,
        pool: Callable[[], Pool | None],
        allow_private: bool = False,
        *,
        max_watched: int = DEFAULT_MAX_WATCHED,
        top_up: TopUp = lambda pubkey: {},
        actions_per_minute: int = DEFAULT_ACTIONS_PER_MINUTE,
    ) -> None:
        self.pool = pool
        self.allow_private = allow_private
        self.max_watched = max_watched
        self.top_up = top_up
        self.actions_per_minute = actions_per_minute

    @classmethod
    def from_settings(
        cls, pool: Callable[[], Pool | None], settings: WebhookSettings, top_up: TopUp
    ) -> WebhookEndpoints:
        max_watched = settings.webhook_watched_addresses_per_account
        actions = settings.webhook_actions_per_minute
        return cls(
            pool, settings.webhook_allow_private, max_watched=max_watched, top_up=top_up, actions_per_minute=actions
        )

    async def create(self, call: Call) -> Reply:
        caller = call.authenticated().pubkey
        new = parse_creation(call.body, caller, self.allow_private)
        secret = new_secret()
        created = await webhooks.create(
            self._pool(),
            caller,
            new,
            secret,
            MAX_WEBHOOKS_PER_ACCOUNT,
            max_watched=self.max_watched,
            min_balance=MIN_BALANCE_TO_CREATE,
        )
        if isinstance(created, Refused):
            raise self._refusal(caller, created)
        return json_reply(201, {**webhook_document(WebhookView(created, NO_DELIVERIES, None)), "secret": secret})

    async def listing(self, call: Call) -> Reply:
        views = await webhooks.listing(self._pool(), call.authenticated().pubkey)
        return json_reply(
            200,
            {
                "webhooks": [webhook_document(v) for v in views],
                "max_webhooks": MAX_WEBHOOKS_PER_ACCOUNT,
                "max_watched_addresses": self.max_watched,
            },
        )

    async def delete(self, call: Call) -> Reply:
        target = webhook_id(call.path)
        cancelled = await webhooks.delete(self._pool(), call.authenticated().pubkey, target)
        if cancelled is None:
            raise _not_found()
        return json_reply(200, {"ok": True, "id": target, "cancelled_jobs": cancelled})

    async def rotate_secret(self, call: Call) -> Reply:
        target = webhook_id(call.path)
        parse_empty(call.body)
        secret = new_secret()
        if not await webhooks.rotate_secret(self._pool(), call.authenticated().pubkey, target, secret):
            raise _not_found()
        return json_reply(200, {"secret": secret})

    async def replay(self, call: Call) -> Reply:
        target = webhook_id(call.path)
        parse_empty(call.body)
        await self._may_deliver(call.authenticated().pubkey)
        replayed = await webhooks.replay_dead(self._pool(), call.authenticated().pubkey, target)
        if replayed is None:
            raise _not_found()
        return json_reply(200, {"ok": True, "id": target, "replayed": replayed})

    async def resume(self, call: Call) -> Reply:
        target = webhook_id(call.path)
        parse_empty(call.body)
        await self._may_deliver(call.authenticated().pubkey)
        resumed = await webhooks.resume(self._pool(), call.authenticated().pubkey, target)
        if resumed is None:
            raise _not_found()
        return json_reply(200, {"ok": True, "id": target, "resumed": resumed, "status": "active"})

    async def pause(self, call: Call) -> Reply:
        """Free and not rate-limited: a pause makes no delivery go out (a resume is limited)."""
        target = webhook_id(call.path)
        parse_empty(call.body)
        paused = await webhooks.pause_owned(self._pool(), call.authenticated().pubkey, target)
        if paused is None:
            raise _not_found()
        return json_reply(200, {"ok": True, "id": target, "paused": paused, "status": "paused"})

    async def deliveries(self, call: Call) -> Reply:
        target = webhook_id(call.path)
        limit, before = delivery_page(call.query)
        rows = await webhooks.deliveries(self._pool(), call.authenticated().pubkey, target, limit, before)
        if rows is None:
            raise _not_found()
        next_cursor = str(rows[-1].job_id) if len(rows) == limit else None
        return json_reply(
            200, {"id": target, "entries": [delivery_document(target, d) for d in rows], "next_cursor": next_cursor}
        )

    async def _may_deliver(self, caller: str) -> None:
        """What makes deliveries go out again (a replay, a resume) is refused as a creation is: 403 for a
        suspended account, 402 without a positive balance (its deliveries are paid); and 429 past
        ``actions_per_minute`` of them per account (docs/api.md, Limits)."""
        balance, suspended = await webhooks.standing(self._pool(), caller)
        if suspended:
            raise account_suspended()
        if balance < MIN_BALANCE_TO_CREATE:
            refusal = self._refusal(caller, Refused(Refusal.NO_CREDITS, balance))
            message = "insufficient credits: a replay or resume needs a positive balance (its deliveries are paid)"
            raise dataclasses.replace(refusal, message=message)
        wait_s = await webhooks.take_action(self._pool(), caller, self.actions_per_minute)
        if wait_s is not None:  # they are free, and each makes deliveries due again: bounded per account
            raise dataclasses.replace(
                address_rate_limited(wait_s),
                message=f"too many replays and resumes: {self.actions_per_minute} a minute per account; "
                f"retry in {wait_s} s",
            )

    def _refusal(self, caller: str, refused: Refused) -> ProxyError:
        if refused.reason is Refusal.SUSPENDED:
            return account_suspended()
        if refused.reason is Refusal.NO_CREDITS:
            # The 402 of any call an account cannot pay for: a JSON-RPC body on every route (docs/api.md, Errors).
            error = insufficient_credits(MIN_BALANCE_TO_CREATE, refused.balance, self.top_up(caller))
            message = "insufficient credits: creating a webhook needs a positive balance (its deliveries are paid)"
            return dataclasses.replace(error, message=message, style=ReplyStyle.JSONRPC)
        if refused.reason is Refusal.TOO_MANY_ADDRESSES:
            return invalid_request(
                f"this account's webhooks watch {self.max_watched} addresses, the most one account may watch: "
                "delete a watch of another address first"
            )
        return invalid_request(
            f"this account has {MAX_WEBHOOKS_PER_ACCOUNT} webhooks, the most it may hold: delete one first"
        )

    def _pool(self) -> Pool:
        pool = self.pool()
        if pool is None:
            raise StoreUnavailable(webhooks.WHAT)
        return pool


def webhook_id(path: str) -> int:
    """The id of ``/webhooks/{id}[/action]``; 404 for one that cannot be an id (so it looks like any
    unknown id). The routes' own pattern guarantees the shape of the path."""
    target = whole_number(path.rsplit(PATH + "/", 1)[-1].split("/", 1)[0], MAX_ID)
    if target is None or target < 1:
        raise _not_found()
    return target


def delivery_page(query: Mapping[str, str]) -> tuple[int, int | None]:
    """``limit`` (1 to :data:`MAX_DELIVERIES`, default :data:`DEFAULT_DELIVERIES`) and ``cursor`` (a
    page's ``next_cursor``: a job id); anything else in them is 400 INVALID_REQUEST."""
    limit = DEFAULT_DELIVERIES
    if "limit" in query:
        given = whole_number(query["limit"], MAX_DELIVERIES)
        if given is None or given < 1:
            raise invalid_request(f"limit must be an integer from 1 to {MAX_DELIVERIES}")
        limit = given
    before = None
    if "cursor" in query:
        before = whole_number(query["cursor"], MAX_ID)
        if before is None or before < 1:
            raise invalid_request("cursor must be the next_cursor of a page (an integer from 1)")
    return limit, before


def delivery_document(hook_id: int, d: Delivery) -> dict[str, Any]:
    """One event as ``GET /webhooks/{id}/deliveries`` answers it (docs/api.md, Webhooks)."""
    return {
        "event_id": event_id(hook_id, d.job_id),
        "event_type": d.event_type,
        "status": d.status,
        "attempts": d.attempts,
        "http_status": d.http_status,
        "response_excerpt": d.excerpt,
        "error": d.error,
        "created_at": iso8601(d.created_at),
        "last_attempt_at": _time(d.last_attempt_at),
        "next_attempt_at": _time(d.next_attempt_at),
        "delivered_at": _time(d.delivered_at),
    }


def _time(at: datetime | None) -> str | None:
    return None if at is None else iso8601(at)


def webhook_document(view: WebhookView) -> dict[str, Any]:
    """A subscription as answered (the listing's element; the creation adds ``secret``)."""
    hook, counts = view.webhook, view.counts
    return {
        "id": hook.id,
        "url": hook.url,
        "filter_type": hook.filter_type,
        "filter_value": hook.filter_value,
        "lifecycle_events": list(hook.lifecycle_events),
        "signal_events": list(hook.signal_events),
        "status": hook.status.value,
        "paused_reason": hook.paused_reason,
        "created_at": iso8601(hook.created_at),
        "secret_rotated_at": None if hook.secret_rotated_at is None else iso8601(hook.secret_rotated_at),
        "deliveries": {"pending": counts.pending, "delivered": counts.delivered, "dead": counts.dead},
        "last_delivery": None if view.last is None else _last_delivery(hook.id, view.last),
    }


def _last_delivery(hook_id: int, last: LastDelivery) -> dict[str, Any]:
    return {
        "event_id": event_id(hook_id, last.job_id),
        "event_type": last.event_type,
        "status": last.status,
        "attempts": last.attempts,
        "http_status": last.http_status,
        "error": last.error,
        "created_at": iso8601(last.created_at),
        "delivered_at": None if last.delivered_at is None else iso8601(last.delivered_at),
    }


def _not_found() -> ProxyError:
    return not_found("no such webhook on this account")

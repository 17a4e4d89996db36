"""Transaction watches of accounts that cannot pay hold no watched address (docs/api.md, Webhooks).

A watch on a quiet address makes no delivery whose charge could fail, so only the watcher can notice
that its account spent its credits: at each refresh it pauses the active watches of accounts whose
balance is below one delivery's price, with the reason ``GET /webhooks`` shows. Paused, a watch is not
among the addresses followed (so another account's address takes its place under the global cap),
its address is neither streamed nor polled for it, and it receives nothing; ``POST /webhooks/{id}/resume``
after a deposit brings it back, and it catches up on what happened meanwhile.

Real parts throughout: the module's own PostgreSQL database, a gateway in this process on it for the
``/webhooks`` routes, the session's devnode (transfers, ``getSignaturesForAddress``, its PubSub), and
the watcher's own code (:class:`~gateway.webhooks.sources.TransactionWatches`), driven pass by pass as
tests/webhooks/test_sources.py drives it. The global cap of 5,000 addresses is 1 here.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass

import aiohttp
import asyncpg
import pytest
from solana.rpc.async_api import AsyncClient
from solders.keypair import Keypair
from solders.pubkey import Pubkey

from devnode.node import Devnode
from gateway.node.http import HttpUpstream
from gateway.node.pubsub import UpstreamPubSub
from gateway.webhooks.rules import TRANSACTION_DELIVERY_CREDITS
from gateway.webhooks.sources import TransactionWatches
from tests.chain import airdrop, send_sol
from tests.credits.helpers import fund
from tests.support import RunningGateway
from tests.webhooks.conftest import WebhookClient
from tests.webhooks.support import balance, conserved, eventually, is_true, spend

#: A deposit of 0.01 USDC: what an account needs to create its watches.
SMALL_DEPOSIT = 1_000
RECEIVER = "https://receiver.example/hook"  # never posted to: no dispatcher runs here


@dataclass
class Node:
    client: AsyncClient
    upstream: HttpUpstream
    pubsub: UpstreamPubSub
    payer: Keypair

    async def transfer(self, to: Pubkey) -> str:
        return str(await send_sol(self.client, self.payer, to, 1_000_000))


@pytest.fixture
async def node(devnode: Devnode) -> AsyncIterator[Node]:
    client, upstream, pubsub = (
        AsyncClient(devnode.rpc_url),
        HttpUpstream(devnode.rpc_url),
        UpstreamPubSub(devnode.ws_url),
    )
    try:
        payer = Keypair()
        await airdrop(devnode.rpc_url, payer.pubkey(), 5 * 10**9)
        yield Node(client, upstream, pubsub, payer)
    finally:
        await pubsub.close()
        await upstream.close()
        await client.close()


@pytest.fixture(autouse=True)
async def alone(pool: asyncpg.Pool) -> None:
    """Only this test's watches count against the cap: the earlier tests' are deleted (the database is
    the module's own)."""
    await pool.execute("UPDATE webhooks SET status = 'deleted', deleted_at = now() WHERE status <> 'deleted'")


async def signatures(pool: asyncpg.Pool, webhook_id: int) -> list[str]:
    rows = await pool.fetch("SELECT dedupe_key FROM delivery_jobs WHERE webhook_id = $1 ORDER BY id", webhook_id)
    return [row["dedupe_key"] for row in rows]


def subscribed(pubsub: UpstreamPubSub, address: Pubkey) -> bool:
    """Whether the node's PubSub is asked for ``address`` (a ``logsSubscribe`` mentioning it)."""
    return any(method == "logsSubscribe" and str(address).encode() in params for method, params in pubsub.shares)


def unfunded_reason(webhook_id: int, balance: int = 0) -> str:
    return (
        f"insufficient credits: a transaction delivery costs {TRANSACTION_DELIVERY_CREDITS} and the balance is "
        f"{balance}, so its address is not watched: deposit, then POST /webhooks/{webhook_id}/resume"
    )


async def watch(client: WebhookClient, address: Pubkey) -> int:
    created = await client.created(url=RECEIVER, filter_type="account", filter_value=str(address))
    webhook_id: int = created["id"]
    return webhook_id


async def test_a_drained_accounts_watch_gives_its_place_to_another_account_until_resumed(
    pool: asyncpg.Pool, gateway_here: RunningGateway, http: aiohttp.ClientSession, node: Node
) -> None:
    """The older watch holds the one place; its account spends its credits; at the next pass it is
    paused, its address dropped from the stream and the polls, and the newer account's address is
    followed instead. A resume without credits is refused (402, as a creation); after a
    deposit and a resume it is followed again and receives what happened while it was paused."""
    drained = await WebhookClient.new(http, gateway_here, credits=SMALL_DEPOSIT)
    other = await WebhookClient.new(http, gateway_here)
    x, y = Keypair().pubkey(), Keypair().pubkey()
    drained_hook = await watch(drained, x)
    other_hook = await watch(other, y)
    watches = TransactionWatches(pool, node.upstream, node.pubsub, max_addresses=1)
    try:
        await watches.poll_all()
        assert watches.addresses == [str(x)]  # the longest-watched first: y waits for a place
        await eventually(lambda: is_true(watches.streamed(str(x))), "x streamed")

        await spend(pool, drained.pubkey, SMALL_DEPOSIT)  # all its credits, on calls
        await watches.poll_all()
        assert watches.addresses == [str(y)]
        assert watches.next_poll_in(str(x)) is None and not subscribed(node.pubsub, x)
        await eventually(lambda: is_true(watches.streamed(str(y))), "y streamed in x's place")
        assert watches.stats.paused_unfunded == 1
        (listed,) = await drained.listed()
        assert (listed["status"], listed["paused_reason"]) == ("paused", unfunded_reason(drained_hook))
        assert [hook["status"] for hook in await other.listed()] == ["active"]

        to_x, to_y = await node.transfer(x), await node.transfer(y)
        await watches.poll_all()
        assert await signatures(pool, drained_hook) == []  # not watched: nothing written, nothing to charge
        assert await signatures(pool, other_hook) == [to_y]

        resumed = await drained.action(drained_hook, "resume")  # still no credits: refused, as a creation is
        assert (resumed.status, resumed.json["error"]["code"]) == (402, -32010), resumed
        await watches.poll_all()
        assert watches.addresses == [str(y)]
        (listed,) = await drained.listed()
        assert (listed["status"], listed["paused_reason"]) == ("paused", unfunded_reason(drained_hook))

        await fund(pool, drained.pubkey, 100)
        await watches.poll_all()
        assert watches.addresses == [str(y)]  # a deposit does not resume it: its owner does
        resumed = await drained.action(drained_hook, "resume")
        assert resumed.status == 200 and resumed.json == {
            "ok": True,
            "id": drained_hook,
            "resumed": True,
            "status": "active",
        }
        await watches.poll_all()
        assert watches.addresses == [str(x)]  # the longest-watched first again
        await eventually(lambda: is_true(watches.streamed(str(x))), "x streamed again")
        assert await signatures(pool, drained_hook) == [to_x]  # caught up on what happened while paused
        (listed,) = await drained.listed()
        assert (listed["status"], listed["paused_reason"]) == ("active", None)
    finally:
        await watches.close()
    assert await balance(pool, drained.pubkey) == 100 and await conserved(pool, drained.pubkey)


async def test_a_drained_accounts_watch_of_a_shared_address_receives_nothing(
    pool: asyncpg.Pool, gateway_here: RunningGateway, http: aiohttp.ClientSession, node: Node
) -> None:
    """An address another account also watches stays followed for that account; the drained account's
    watch of it is paused and gets no job."""
    drained = await WebhookClient.new(http, gateway_here, credits=SMALL_DEPOSIT)
    paying = await WebhookClient.new(http, gateway_here)
    x = Keypair().pubkey()
    drained_hook, paying_hook = await watch(drained, x), await watch(paying, x)
    watches = TransactionWatches(pool, node.upstream)
    await watches.poll_all()

    await spend(pool, drained.pubkey, SMALL_DEPOSIT)
    to_x = await node.transfer(x)
    await watches.poll_all()
    assert watches.addresses == [str(x)]
    assert await signatures(pool, paying_hook) == [to_x]
    assert await signatures(pool, drained_hook) == []
    (listed,) = await drained.listed()
    assert (listed["status"], listed["paused_reason"]) == ("paused", unfunded_reason(drained_hook))


async def test_a_suspended_accounts_watch_holds_no_watched_address(
    pool: asyncpg.Pool, gateway_here: RunningGateway, http: aiohttp.ClientSession, node: Node
) -> None:
    """A suspended account can pay for nothing, whatever its balance: its watch is paused like a drained one's."""
    suspended = await WebhookClient.new(http, gateway_here)
    x = Keypair().pubkey()
    hook = await watch(suspended, x)
    watches = TransactionWatches(pool, node.upstream)
    try:
        await watches.poll_all()
        assert watches.addresses == [str(x)]
        await pool.execute("UPDATE accounts SET status = 'suspended' WHERE pubkey = $1", suspended.pubkey)
        await watches.poll_all()
        assert watches.addresses == []
        row = await pool.fetchrow("SELECT status, paused_reason FROM webhooks WHERE id = $1", hook)
        assert row["status"] == "paused"
        assert row["paused_reason"] == (
            "the account is suspended, so its address is not watched: "
            f"POST /webhooks/{hook}/resume once it is active again"
        )
    finally:
        await watches.close()

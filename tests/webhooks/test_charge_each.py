"""Charging several claimed jobs at once (:func:`gateway.webhooks.store.jobs.charge_each`, which a dispatcher's
:class:`gateway.webhooks.charging.Charges` gathers) decides each job as charging them one by one does:
the same charges, ledger entries, balance, paused subscriptions and jobs, on the module's own database.
"""

from __future__ import annotations

import asyncio

import asyncpg

from gateway.core.credits import no_events
from gateway.webhooks.charging import Charges
from gateway.webhooks.store import jobs as delivery_jobs
from gateway.webhooks.store.jobs import Charge, ClaimedJob, ClaimRules
from tests.webhooks.support import Hook, account, balance, conserved, enqueue, ledger, spend, subscribe

PRICE = 5
URL = "http://127.0.0.1:9/hook"  # never posted to: these tests charge, they do not deliver


async def _claimed(pool: asyncpg.Pool, dispatcher: str, hooks: list[Hook], prices: list[int]) -> list[ClaimedJob]:
    """One job per price, round the hooks, claimed by ``dispatcher``; in id order."""
    ids = [await enqueue(pool, hooks[n % len(hooks)], price=price) for n, price in enumerate(prices)]
    claimed = await delivery_jobs.claim(pool, dispatcher, len(ids), ClaimRules(60, per_webhook=len(ids)))
    assert [job.id for job in claimed] == ids
    return claimed


async def _short_account(pool: asyncpg.Pool, hooks: int, left: int) -> list[Hook]:
    """``hooks`` subscriptions of an account holding ``left`` credits."""
    pubkey = await account(pool, 10_000)  # 1,000 credits
    await spend(pool, pubkey, await balance(pool, pubkey) - left)
    return [await subscribe(pool, URL, pubkey, signal=True) for _ in range(hooks)]


async def _state(pool: asyncpg.Pool, pubkey: str, jobs: list[ClaimedJob]) -> tuple[object, ...]:
    """What charging left, named by position rather than id (two accounts compared)."""
    entries = [(kind, amount) for kind, amount, _ in await ledger(pool, pubkey)]
    rows = await pool.fetch(
        "SELECT status, attempts, charged, last_error FROM delivery_jobs WHERE id = ANY($1) ORDER BY id",
        [job.id for job in jobs],
    )
    hooks = await pool.fetch(
        "SELECT status, paused_reason FROM webhooks WHERE pubkey = $1 ORDER BY id",
        pubkey,
    )
    # the id where a reason names it (".../webhooks/<id>/resume"), never a digit of the price a reason gives
    own = f"/webhooks/{jobs[0].webhook_id}/"
    reasons = [(h["status"], (h["paused_reason"] or "").replace(own, "/webhooks/<id>/")) for h in hooks]
    return entries, await balance(pool, pubkey), [tuple(r) for r in rows], [(s, r[:40]) for s, r in reasons]


async def test_jobs_charged_at_once_are_decided_as_one_by_one(pool: asyncpg.Pool) -> None:
    prices = [PRICE, PRICE, PRICE, 1]  # 12 credits: two of 5 fit, the third not, then one of 1 does
    together_hooks = await _short_account(pool, 2, 12)
    alone_hooks = await _short_account(pool, 2, 12)
    together = await _claimed(pool, "d-together", together_hooks, prices)
    alone = await _claimed(pool, "d-alone", alone_hooks, prices)

    at_once = await delivery_jobs.charge_each(pool, "d-together", together)
    one_by_one = {job.id: await delivery_jobs.charge(pool, "d-alone", job) for job in alone}

    assert [at_once[job.id] for job in together] == [one_by_one[job.id] for job in alone]
    assert [at_once[job.id] for job in together] == [Charge.CHARGED, Charge.CHARGED, Charge.UNPAID, Charge.CHARGED]
    pubkey = together_hooks[0].pubkey
    deliveries = [entry for entry in await ledger(pool, pubkey) if (entry[2] or "").startswith("delivery:")]
    charged = [(job, price) for job, price in zip(together, prices, strict=True) if at_once[job.id] is Charge.CHARGED]
    assert deliveries == [("debit", -price, f"delivery:{job.id}") for job, price in charged]
    assert await _state(pool, pubkey, together) == await _state(pool, alone_hooks[0].pubkey, alone)
    assert await balance(pool, pubkey) == 1
    assert await conserved(pool, pubkey)


async def test_a_job_charged_once_is_not_charged_again_and_a_lost_claim_is_not_charged(pool: asyncpg.Pool) -> None:
    hooks = await _short_account(pool, 1, 100)
    first, second = await _claimed(pool, "d-1", hooks, [PRICE, PRICE])
    assert await delivery_jobs.charge_each(pool, "d-1", [first]) == {first.id: Charge.CHARGED}
    again = ClaimedJob(**{**first.__dict__, "charged": 0})  # a stale copy: the row says charged
    lost = ClaimedJob(**{**second.__dict__, "attempts": second.attempts + 1})  # another claim's token
    assert await delivery_jobs.charge_each(pool, "d-1", [again, lost]) == {
        first.id: Charge.PAID,
        second.id: Charge.LOST,
    }
    assert [ref for kind, _, ref in await ledger(pool, hooks[0].pubkey) if kind == "debit"][
        -1
    ] == f"delivery:{first.id}"
    assert await balance(pool, hooks[0].pubkey) == 100 - PRICE


async def test_charges_asked_for_at_once_are_each_answered_and_charged_once(pool: asyncpg.Pool) -> None:
    hooks = await _short_account(pool, 4, 10 * PRICE + 2)
    claimed = await _claimed(pool, "d-gather", hooks, [PRICE] * 12)
    charges = Charges(pool, "d-gather", no_events)
    try:
        answers = await asyncio.gather(*(charges.charge(job) for job in claimed))
    finally:
        await charges.close()
    assert answers == [Charge.CHARGED] * 10 + [Charge.UNPAID] * 2
    debits = [ref for kind, _, ref in await ledger(pool, hooks[0].pubkey) if kind == "debit"]
    assert debits[-10:] == [f"delivery:{job.id}" for job in claimed[:10]]
    assert await balance(pool, hooks[0].pubkey) == 2
    assert await conserved(pool, hooks[0].pubkey)


async def test_two_accounts_asked_at_once_are_each_charged_on_their_own(pool: asyncpg.Pool) -> None:
    rich = await _short_account(pool, 1, 100)
    short = await _short_account(pool, 1, PRICE)
    claimed = await _claimed(pool, "d-two", [rich[0], short[0]], [PRICE] * 4)  # rich, short, rich, short
    charges = Charges(pool, "d-two", no_events)
    try:
        answers = await asyncio.gather(*(charges.charge(job) for job in claimed))
    finally:
        await charges.close()
    assert answers == [Charge.CHARGED, Charge.CHARGED, Charge.CHARGED, Charge.UNPAID]
    assert await balance(pool, rich[0].pubkey) == 100 - 2 * PRICE
    assert await balance(pool, short[0].pubkey) == 0
    assert await conserved(pool, rich[0].pubkey) and await conserved(pool, short[0].pubkey)

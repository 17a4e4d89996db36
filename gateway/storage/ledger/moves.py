"""The one billing primitive: every charge of an account's balance, and the refund of an earlier one.

:func:`debit` is how sends (:func:`gateway.storage.sends.settle`), paid webhook deliveries
(:func:`gateway.webhooks.store.jobs.charge_each`) and lease settlement (:func:`gateway.storage.ledger.settle`)
take credits; :func:`refund` is how a delivery's charge is given back
(:mod:`gateway.webhooks.store.refunds`); :func:`credit` is an operator's grant of new credits. All run in
the caller's transaction, holding the account lock the caller took with
:func:`gateway.storage.ledger.sql.lock_account` before locking its own rows (the lease, the send,
the job): every credit writer locks the account first, so they serialise per account and never wait
for each other in turn. Each writes its ledger entries, moves the batches and
the ``accounts`` row together, so the conservation of :mod:`gateway.storage.ledger` holds at commit.

Whether the account can pay is the caller's to decide before it debits, as each proved it its own way:
a lease settles at most what its grant held, a send at most what its hold held, a delivery checks the
balance less what leases and sends hold and pauses its webhook instead. Deposits and expiry move the
balance their own way (:mod:`gateway.storage.deposits`, :mod:`gateway.storage.ledger.expiry`): they add
or retire whole batches rather than consume or restore them.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import asyncpg

from gateway.core.credits import LOW_BALANCE_CREDITS
from gateway.core.webhook_events import LOW_BALANCE, crosses_low_balance, low_balance
from gateway.storage.ledger.cap import SPENT_AFTER_DEBIT, SPENT_AFTER_REFUND
from gateway.storage.ledger.sql import Entry, add_entries, consume_batches, restore_batches
from gateway.storage.webhook_events import enqueue_lifecycle


@dataclass(frozen=True, slots=True)
class Move:
    """One ledger entry to write; its ``balance_after`` follows from the order of the moves."""

    kind: str  # the entry's type: ``debit`` or ``refund``
    amount: int  # signed, as in the ledger: a debit is negative
    description: str
    ref: str | None  # what the entry is about: ``lease:<id>``, a send's signature, ``delivery:<job id>``


@dataclass(frozen=True, slots=True)
class Debited:
    balance: int  # the account's balance after the debit
    charged: int  # the net credits taken (out of the batches, into ``total_consumed``)
    crossed_low: (
        bool  # it crossed the low-balance line: the ``low_balance`` jobs are written, fire its hook after commit
    )


async def debit(conn: asyncpg.Connection, account: asyncpg.Record, moves: Sequence[Move]) -> Debited:
    """Charge ``moves`` to the account whose row ``account`` is, as :func:`lock_account` returned it in
    this transaction (no other move of its balance since): the entries written in order, their net
    taken from the batches earliest-expiring first, the balance and ``total_consumed`` moved, and on
    a first crossing below the low-balance line the flag set and the ``low_balance`` event's jobs
    written. Nothing to move writes nothing.

    ``moves`` may mix kinds: a lease's flush writes a ``debit`` per method and one ``refund`` of the
    calls refunded in the same flush, which never left the batches, so only the net is consumed (and
    counts for the low-balance crossing). A refund of a charge made in an earlier transaction is
    :func:`refund`, which puts the credits back into the batches.
    """
    if not moves:
        return Debited(int(account["balance"]), 0, False)
    pubkey: str = account["pubkey"]
    start = int(account["balance"])
    balance, entries = _entries(start, moves)
    charged = start - balance
    assert charged >= 0, f"a debit of {pubkey} that adds {-charged} credits"
    await add_entries(conn, pubkey, entries)
    await consume_batches(conn, pubkey, charged)
    crossed = crosses_low_balance(charged, balance, account["low_balance_notified"])
    await conn.execute(
        f"""UPDATE accounts SET balance = $2, total_consumed = total_consumed + $3,
                  low_balance_notified = low_balance_notified OR $4, {SPENT_AFTER_DEBIT}
           WHERE pubkey = $1""",
        pubkey,
        balance,
        charged,
        crossed,
    )
    if crossed:
        await enqueue_lifecycle(conn, pubkey, LOW_BALANCE, low_balance(balance))
    return Debited(balance, charged, crossed)


async def refund(conn: asyncpg.Connection, account: asyncpg.Record, moves: Sequence[Move]) -> int:
    """Give back charges an earlier :func:`debit` took (each move a positive ``refund``) to the account
    whose row ``account`` is, as :func:`lock_account` returned it in this transaction; the balance after.

    The reverse of :func:`debit`: the credits go back into the batches latest-expiring first, the
    balance rises and ``total_consumed`` falls. The low-balance flag is left as it is: only a deposit
    that lifts the balance above the line re-arms the notice (:mod:`gateway.storage.deposits`).
    Nothing to move writes nothing.
    """
    if not moves:
        return int(account["balance"])
    for move in moves:
        assert move.amount > 0, move
    pubkey: str = account["pubkey"]
    start = int(account["balance"])
    balance, entries = _entries(start, moves)
    await add_entries(conn, pubkey, entries)
    await restore_batches(conn, pubkey, balance - start)
    await conn.execute(
        f"""UPDATE accounts SET balance = $2, total_consumed = total_consumed - $3, {SPENT_AFTER_REFUND}
           WHERE pubkey = $1""",
        pubkey,
        balance,
        balance - start,
    )
    return balance


async def credit(
    conn: asyncpg.Connection, account: asyncpg.Record, amount: int, expires_s: int, description: str, ref: str | None
) -> int:
    """Grant ``amount`` new credits (an operator's correction) to the account whose row ``account`` is, as
    :func:`lock_account` returned it in this transaction; the balance after.

    Like a deposit: a batch of its own (source ``adjustment``, expiring ``expires_s`` from now), one
    ``adjustment`` ledger entry, the balance moved, and the low-balance notice re-armed once the balance
    is back at the line or above.
    """
    assert amount > 0 and expires_s > 0, (amount, expires_s)
    pubkey: str = account["pubkey"]
    balance = int(account["balance"]) + amount
    await conn.execute(
        """INSERT INTO credit_batches (pubkey, source, granted, remaining, expires_at)
           VALUES ($1, 'adjustment', $2, $2, now() + $3::bigint * interval '1 second')""",
        pubkey,
        amount,
        expires_s,
    )
    await add_entries(conn, pubkey, [("adjustment", amount, balance, description, ref)])
    await conn.execute(
        """UPDATE accounts SET balance = $2, low_balance_notified = low_balance_notified AND $2::bigint < $3::bigint
           WHERE pubkey = $1""",
        pubkey,
        balance,
        LOW_BALANCE_CREDITS,
    )
    return balance


def _entries(balance: int, moves: Sequence[Move]) -> tuple[int, list[Entry]]:
    """The ledger entries of ``moves`` from ``balance``, each with the balance after it; the last balance."""
    entries: list[Entry] = []
    for move in moves:
        balance += move.amount
        entries.append((move.kind, move.amount, balance, move.description, move.ref))
    return balance, entries

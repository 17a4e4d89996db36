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
balance less what leases and sends hold and pauses its webhook instead. New credits (a deposit and its
bonus, an operator's grant) are :func:`grant`\ ed as batches of their own, and expired ones leave their
batches through :func:`expire`: this module is the only one that sets an account's balance
(tests/storage/test_balance_writer.py holds it so).
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
    or a grant that lifts the balance above the line re-arms the notice (:func:`grant`).
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


@dataclass(frozen=True, slots=True)
class Grant:
    """New credits: a batch of their own and the ledger entry that grants them."""

    kind: str  # the entry's type and the batch's source: ``deposit``, ``bonus``, ``adjustment``
    amount: int
    description: str
    ref: str | None  # the entry's: a deposit's signature, an operator's reference
    deposit_signature: str | None = None  # the batch's deposit (a deposit's credits and their bonus)


async def grant(conn: asyncpg.Connection, account: asyncpg.Record, grants: Sequence[Grant], expires_s: int) -> int:
    """Add ``grants`` to the account whose row ``account`` is, as :func:`lock_account` returned it in this
    transaction: a batch each, expiring ``expires_s`` from now, an entry each, the balance moved, and the
    low-balance notice re-armed once the balance is back at the line or above; the balance after."""
    pubkey: str = account["pubkey"]
    balance = int(account["balance"])
    entries: list[Entry] = []
    for new in grants:
        assert new.amount > 0, new
        await conn.execute(
            """INSERT INTO credit_batches (pubkey, source, granted, remaining, expires_at, deposit_signature)
               VALUES ($1, $2, $3, $3, now() + $4::bigint * interval '1 second', $5)""",
            pubkey,
            new.kind,
            new.amount,
            expires_s,
            new.deposit_signature,
        )
        balance += new.amount
        entries.append((new.kind, new.amount, balance, new.description, new.ref))
    await add_entries(conn, pubkey, entries)
    await conn.execute(
        """UPDATE accounts SET balance = $2, low_balance_notified = low_balance_notified AND $2::bigint < $3::bigint
           WHERE pubkey = $1""",
        pubkey,
        balance,
        LOW_BALANCE_CREDITS,
    )
    return balance


async def credit(
    conn: asyncpg.Connection, account: asyncpg.Record, amount: int, expires_s: int, description: str, ref: str | None
) -> int:
    """Grant ``amount`` new credits (an operator's correction), like a deposit: a batch of its own (source
    ``adjustment``, expiring ``expires_s`` from now) and one ``adjustment`` entry (:func:`grant`); the
    balance after."""
    assert amount > 0 and expires_s > 0, (amount, expires_s)
    return await grant(conn, account, [Grant("adjustment", amount, description, ref)], expires_s)


async def expire(conn: asyncpg.Connection, account: asyncpg.Record, expired: Sequence[tuple[int, int, str]]) -> int:
    """Retire ``expired`` credits, each ``(batch id, credits, the batch's source)``, from the account whose
    row ``account`` is, as :func:`lock_account` returned it in this transaction: taken out of their batches,
    an ``expiry`` entry each (``batch:<id>``), the balance moved; the balance after."""
    pubkey: str = account["pubkey"]
    balance = int(account["balance"])
    entries: list[Entry] = []
    for batch_id, credits, source in expired:
        assert credits > 0, (batch_id, credits)
        await conn.execute("UPDATE credit_batches SET remaining = remaining - $2 WHERE id = $1", batch_id, credits)
        balance -= credits
        entries.append(("expiry", -credits, balance, f"expired {source} credits", f"batch:{batch_id}"))
    if not entries:
        return balance
    await add_entries(conn, pubkey, entries)
    await conn.execute("UPDATE accounts SET balance = $2 WHERE pubkey = $1", pubkey, balance)
    return balance


def _entries(balance: int, moves: Sequence[Move]) -> tuple[int, list[Entry]]:
    """The ledger entries of ``moves`` from ``balance``, each with the balance after it; the last balance."""
    entries: list[Entry] = []
    for move in moves:
        balance += move.amount
        entries.append((move.kind, move.amount, balance, move.description, move.ref))
    return balance, entries

"""The sources of the webhook events that happen outside the gateway: transactions and signals.

(Lifecycle events are written by the transactions that cause them: :mod:`gateway.storage.webhook_events`.)
Both run in the ``webhook-watcher`` actor (:mod:`gateway.webhooks.watcher_actor`), one per cluster.

**Transaction watches** (``account``, ``program``, ``my_account``): :class:`TransactionWatches` re-reads
the watched addresses every ``refresh_s`` (new subscriptions are picked up, deleted and paused ones
dropped). Each refresh first pauses the watches of accounts whose balance is below one delivery's price
(:func:`~gateway.webhooks.store.subscriptions.pause_unfunded_watches`): a quiet address makes no delivery whose
charge could fail, so this is what keeps an account that spent its credits from holding its addresses
among the ``max_addresses`` followed, streamed and polled; its owner resumes it after a deposit. The
writer of jobs is one poll per address, ``getSignaturesForAddress`` (commitment confirmed) from the
newest page down to the address's cursor, oldest first: successful transactions become jobs, and the
cursor moves past them in the same transaction (:func:`~gateway.webhooks.store.sources.record_transactions`),
each priced :data:`~gateway.webhooks.rules.TRANSACTION_DELIVERY_CREDITS` (the dispatcher charges it).
Two things start a poll:

- the node's PubSub, for speed: a ``logsSubscribe`` with ``{"mentions": [address]}`` per address, whose
  notification of a successful transaction wakes that address's poll at once (notifications of failed
  ones are ignored);
- a timer, as the safety net: every address is polled every ``poll_s`` whatever the stream said, so a
  notification missed (a dropped connection, an address the node would not stream) is caught up, and a
  restarted watcher catches up from each cursor on its first pass.

Each job's dedupe key is the transaction's signature, so the stream and the timer, or two passes over
the same page, add one job per subscription and transaction. An address seen for the first time (no
cursor) is read back to the creation of its oldest subscription (at most ``max_pages`` pages), so a
transaction made between a subscription's creation and the watcher's next refresh is delivered too;
a subscription never receives a transaction older than itself
(:data:`~gateway.webhooks.events.BLOCK_TIME_SLACK_S` aside).

Bounds: at most ``max_addresses`` addresses followed (the longest-watched first; the rest are logged
and wait), ``max_polls_per_cycle`` polls per cycle (the most overdue first) with ``concurrency`` in
flight, ``max_pages`` pages of ``page_limit`` signatures per poll (a catch-up longer than that keeps
the newest and logs the gap), a poll of an address at most every ``min_gap_s`` however busy its
stream. A node or database outage stops the cycle and backs off (1 s doubling to 60 s); an address
the node refuses is retried later and later (up to ten minutes).

**Signals** (``signal``): :class:`SignalWebhooks` follows the signal log
(:class:`~gateway.signals.store.SignalLog`) from its position stored in PostgreSQL, and writes one job
per event and matching subscription, priced :data:`~gateway.webhooks.rules.SIGNAL_DELIVERY_CREDITS`,
with the new position in the same transaction; the dedupe key is the stream id. A restart resumes
after the last event written, without loss or repetition (events trimmed from the log while it was
down aside). Its first start begins at the newest event: the log's history is not replayed.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any, Final, Protocol

import orjson

from gateway.base.stopping import cancel_and_wait
from gateway.node.http import ChainError, Upstream, UpstreamTimeout, UpstreamUnavailable, rpc_call
from gateway.signals.store import SignalLog
from gateway.storage.connections import Pool
from gateway.storage.errors import StoreUnavailable
from gateway.webhooks.events import BLOCK_TIME_SLACK_S, transaction
from gateway.webhooks.rules import MAX_WATCHED_ADDRESSES, SIGNAL_DELIVERY_CREDITS, TRANSACTION_DELIVERY_CREDITS
from gateway.webhooks.store.sources import (
    WatchTarget,
    record_signals,
    record_transactions,
    save_source_position,
    source_position,
    watch_cursor,
    watch_targets,
)
from gateway.webhooks.store.subscriptions import pause_unfunded_watches

log = logging.getLogger(__name__)

OUTAGES: Final = (UpstreamUnavailable, UpstreamTimeout, StoreUnavailable)
FIRST_BACKOFF_S: Final = 1.0
MAX_BACKOFF_S: Final = 60.0
#: An address the node keeps refusing is polled at most this rarely.
MAX_REFUSED_BACKOFF_S: Final = 600.0


class PubSub(Protocol):
    """What the watches use of the node's PubSub (:class:`gateway.node.pubsub.UpstreamPubSub`)."""

    async def subscribe(
        self,
        method: str,
        params: list[Any],
        listener: Callable[[bytes, bool], None],
        on_lost: Callable[[str, bool], None],
        final_when: Callable[[Any], bool],
    ) -> Any: ...

    def unsubscribe(self, handle: Any) -> None: ...


@dataclass
class WatchStats:
    cycles: int = 0
    polls: int = 0
    transactions: int = 0  # successful transactions read by polls (repeats included)
    jobs_added: int = 0
    notifications: int = 0  # stream notifications of successful transactions
    paused_unfunded: int = 0  # watches paused because their account's balance was below one delivery's price
    last_error: str | None = None

    def as_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


@dataclass(eq=False)
class _Watch:
    address: str
    since: datetime
    due_at: float = 0.0  # clock time of its next poll (0: at once)
    polled_at: float = -math.inf
    woken: bool = False  # the stream asked for a poll since the last one started
    failures: int = 0
    stream: Any = None  # the PubSub handle while streamed
    subscribing: bool = False
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)


def _never_final(result: Any) -> bool:
    return False


class TransactionWatches:
    """Args:
    pool: PostgreSQL. upstream: the node's JSON-RPC. pubsub: its PubSub, or None to poll only.
    poll_s: each address's poll period when nothing wakes it. refresh_s: how often subscriptions are re-read.
    price: credits per delivery written on each job (the dispatcher charges it).
    Other arguments: the bounds above. clock: monotonic seconds.
    """

    def __init__(
        self,
        pool: Pool,
        upstream: Upstream,
        pubsub: PubSub | None = None,
        *,
        poll_s: float = 15.0,
        refresh_s: float = 5.0,
        price: int = TRANSACTION_DELIVERY_CREDITS,
        max_addresses: int = MAX_WATCHED_ADDRESSES,
        max_polls_per_cycle: int = 64,
        concurrency: int = 8,
        page_limit: int = 200,
        max_pages: int = 5,
        min_gap_s: float = 0.25,
        pending_retry_s: float = 0.5,
        timeout_s: float = 10.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.pool, self.upstream, self.pubsub, self.price = pool, upstream, pubsub, price
        self.poll_s, self.refresh_s = poll_s, refresh_s
        self.max_addresses, self.max_polls_per_cycle = max_addresses, max_polls_per_cycle
        self.page_limit, self.max_pages = page_limit, max_pages
        self.min_gap_s, self.pending_retry_s, self.timeout_s = min_gap_s, pending_retry_s, timeout_s
        self.clock = clock
        self.stats = WatchStats()
        self._watches: dict[str, _Watch] = {}
        self._polls = asyncio.Semaphore(concurrency)
        self._subscribes = asyncio.Semaphore(16)
        self._woken = asyncio.Event()
        self._refresh_at = 0.0
        self._backoff_s = 0.0
        self._resume_at = 0.0
        self._tasks: set[asyncio.Task[None]] = set()
        self._stream_failing = False

    @property
    def addresses(self) -> list[str]:
        return list(self._watches)

    def streamed(self, address: str) -> bool:
        watch = self._watches.get(address)
        return watch is not None and watch.stream is not None

    def next_poll_in(self, address: str) -> float | None:
        """Seconds until ``address`` is polled (0 when due), or None when it is not followed."""
        watch = self._watches.get(address)
        return None if watch is None else max(0.0, watch.due_at - self.clock())

    # -- the subscriptions ------------------------------------------------------------------------

    async def refresh(self) -> None:
        """Pause the watches of accounts that cannot pay one delivery, then re-read the watched addresses:
        follow the new ones (polled at once), drop the gone ones (deleted, paused)."""
        paused = await pause_unfunded_watches(self.pool, self.price)
        if paused:
            self.stats.paused_unfunded += len(paused)
            shown = ", ".join(map(str, paused[:20])) + (", ..." if len(paused) > 20 else "")
            log.info("webhook watches: %d paused, their accounts' balance below %d: %s", len(paused), self.price, shown)
        targets = await watch_targets(self.pool, self.max_addresses + 1)
        if len(targets) > self.max_addresses:
            log.warning("webhook watches: more than %d addresses watched; the newest wait", self.max_addresses)
            targets = targets[: self.max_addresses]
        wanted = {target.address: target for target in targets}
        for address in [a for a in self._watches if a not in wanted]:
            self._forget(address)
        for target in targets:
            self._follow(target)

    def _follow(self, target: WatchTarget) -> None:
        watch = self._watches.get(target.address)
        if watch is None:
            watch = self._watches[target.address] = _Watch(target.address, target.since)
            self._woken.set()
        watch.since = target.since
        if self.pubsub is not None and watch.stream is None and not watch.subscribing:
            watch.subscribing = True
            task = asyncio.get_running_loop().create_task(self._stream(watch))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)

    async def _stream(self, watch: _Watch) -> None:
        assert self.pubsub is not None
        address = watch.address
        try:
            async with self._subscribes:
                handle = await self.pubsub.subscribe(
                    "logsSubscribe",
                    [{"mentions": [address]}, {"commitment": "confirmed"}],
                    functools.partial(self._notified, address),
                    functools.partial(self._lost, address),
                    _never_final,
                )
        except Exception as exc:  # the node refused or is unreachable: polled meanwhile, retried at refresh
            level = logging.DEBUG if self._stream_failing else logging.WARNING
            log.log(level, "webhook watches: no stream for %s (%s); polling it", address, exc)
            self._stream_failing = True
            return
        finally:
            watch.subscribing = False
        self._stream_failing = False
        if self._watches.get(address) is not watch:  # dropped while subscribing
            self.pubsub.unsubscribe(handle)
            return
        watch.stream = handle
        self.wake(address)  # what happened between the last poll and the stream's start

    def _notified(self, address: str, body: bytes, final: bool) -> None:
        try:
            result = orjson.loads(body)
        except orjson.JSONDecodeError:
            result = None
        value = result.get("value") if isinstance(result, dict) else None
        if final:
            self._lost(address, "ended by the node")
        if isinstance(value, dict) and value.get("err") is not None:
            return  # a failed transaction: nothing to deliver
        self.stats.notifications += 1
        self.wake(address)

    def _lost(self, address: str, reason: str, unavailable: bool = False) -> None:
        watch = self._watches.get(address)
        if watch is not None:
            watch.stream = None  # subscribed again at the next refresh; polled meanwhile
            log.info("webhook watches: stream of %s lost (%s)", address, reason)

    def _forget(self, address: str) -> None:
        watch = self._watches.pop(address)
        if watch.stream is not None and self.pubsub is not None:
            self.pubsub.unsubscribe(watch.stream)

    def wake(self, address: str) -> None:
        """Poll ``address`` as soon as its minimum gap allows (the stream saw something)."""
        watch = self._watches.get(address)
        if watch is None:
            return
        watch.woken = True
        watch.due_at = min(watch.due_at, max(self.clock(), watch.polled_at + self.min_gap_s))
        self._woken.set()

    # -- polling -------------------------------------------------------------------------------------

    async def poll(self, address: str) -> int:
        """One poll of a followed ``address`` now: jobs for its new successful transactions; how many."""
        watch = self._watches[address]
        async with watch.lock:
            started = watch.polled_at = self.clock()
            watch.woken = False
            cursor = await watch_cursor(self.pool, address)
            entries = await self._signatures(address, cursor, None if cursor is not None else watch.since)
            ready: list[dict[str, Any]] = []
            for entry in reversed(entries):  # oldest first
                if entry.get("confirmationStatus") == "processed":
                    break  # not confirmed yet (a node that ignores the commitment asked): the next poll
                ready.append(entry)
            pending = len(ready) < len(entries)
            added = 0
            if ready:
                payloads = [p for p in (transaction(e, address) for e in ready) if p is not None]
                newest = ready[-1]
                slot = newest.get("slot")
                added = await record_transactions(
                    self.pool,
                    address,
                    payloads,
                    newest["signature"],
                    slot if isinstance(slot, int) else None,
                    self.price,
                )
                self.stats.transactions += len(payloads)
                self.stats.jobs_added += added
            self.stats.polls += 1
            watch.failures = 0
            if watch.woken:
                watch.due_at = started + self.min_gap_s
            else:
                watch.due_at = self.clock() + (self.pending_retry_s if pending else self.poll_s)
            return added

    async def _signatures(self, address: str, until: str | None, since: datetime | None) -> list[dict[str, Any]]:
        """Signatures newer than ``until`` (or, without it, back to ``since``), newest first, at most
        ``max_pages`` pages."""
        found: list[dict[str, Any]] = []
        before: str | None = None
        for _ in range(self.max_pages):
            cfg: dict[str, Any] = {"commitment": "confirmed", "limit": self.page_limit}
            if until:
                cfg["until"] = until
            if before:
                cfg["before"] = before
            page = await rpc_call(self.upstream, "getSignaturesForAddress", [address, cfg], self.timeout_s)
            if not isinstance(page, list):
                raise ChainError(None, "expected a list", method="getSignaturesForAddress")
            entries = [e for e in page if isinstance(e, dict) and isinstance(e.get("signature"), str)]
            found += entries
            if len(page) < self.page_limit or not entries or (since is not None and _before(entries[-1], since)):
                return found
            before = entries[-1]["signature"]
        if until is not None:
            log.warning(
                "webhook watches: %s has more than %d new signatures; older ones since its cursor are skipped",
                address,
                len(found),
            )
        return found

    async def poll_all(self) -> int:
        """A refresh and one poll of every followed address, now; the jobs added (tests, the actor)."""
        await self.refresh()
        return sum(await asyncio.gather(*(self.poll(address) for address in self.addresses)))

    # -- the loop ----------------------------------------------------------------------------------

    async def run(self, stop: asyncio.Event) -> None:
        """Refresh, stream and poll until ``stop`` is set; survives any single failure."""
        try:
            while not stop.is_set():
                self._woken.clear()
                await self._cycle()
                await _first(stop, self._woken, self._idle_s())
        finally:
            await self.close()

    async def _cycle(self) -> None:
        self.stats.cycles += 1
        now = self.clock()
        if now >= self._refresh_at:
            self._refresh_at = now + self.refresh_s
            try:
                await self.refresh()
            except Exception as exc:
                self._failed("refreshing the watched addresses", exc)
        if now < self._resume_at:
            return
        due = sorted((w for w in self._watches.values() if w.due_at <= now), key=lambda w: w.due_at)
        await asyncio.gather(*(self._guarded(w) for w in due[: self.max_polls_per_cycle]))

    async def _guarded(self, watch: _Watch) -> None:
        async with self._polls:
            if self.clock() < self._resume_at or self._watches.get(watch.address) is not watch:
                return
            try:
                await self.poll(watch.address)
                self._backoff_s = 0.0
            except asyncio.CancelledError:
                raise
            except OUTAGES as exc:  # everyone waits: polling other addresses would fail alike
                self._backoff_s = min(MAX_BACKOFF_S, max(FIRST_BACKOFF_S, 2 * self._backoff_s))
                self._resume_at = self.clock() + self._backoff_s
                self._failed(f"polling {watch.address}", exc)
            except Exception as exc:  # this address (refused by the node, an odd answer): later, then rarer
                watch.failures += 1
                watch.due_at = self.clock() + min(MAX_REFUSED_BACKOFF_S, self.poll_s * 2**watch.failures)
                self._failed(f"polling {watch.address}", exc)

    def _failed(self, what: str, exc: Exception) -> None:
        error = f"{what}: {type(exc).__name__}: {exc}"
        if error != self.stats.last_error:  # a streak of the same failure is logged once
            log.warning("webhook watches: %s", error)
        self.stats.last_error = error

    def _idle_s(self) -> float:
        now = self.clock()
        wake_at = min([self._refresh_at, *(w.due_at for w in self._watches.values())])
        return min(self.refresh_s, max(0.0, max(wake_at, self._resume_at) - now))

    async def close(self) -> None:
        await cancel_and_wait(*self._tasks)
        for address in list(self._watches):
            self._forget(address)


def _before(entry: dict[str, Any], since: datetime) -> bool:
    """Whether a signature's block time is older than ``since`` (less the slack): the first-sight read stops."""
    block_time = entry.get("blockTime")
    if not isinstance(block_time, int):
        return False
    return block_time < (since - timedelta(seconds=BLOCK_TIME_SLACK_S)).timestamp()


async def _first(stop: asyncio.Event, woken: asyncio.Event, timeout_s: float) -> None:
    """Wait until ``stop`` or ``woken`` is set, at most ``timeout_s``."""
    if timeout_s <= 0 or stop.is_set() or woken.is_set():
        return
    waiters = [asyncio.ensure_future(stop.wait()), asyncio.ensure_future(woken.wait())]
    try:
        await asyncio.wait(waiters, timeout=timeout_s, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for waiter in waiters:
            waiter.cancel()


# -------------------------------------------------------------------------------------------- signals


@dataclass
class SignalStats:
    events: int = 0
    jobs_added: int = 0
    failures: int = 0
    position: str | None = None

    def as_dict(self) -> dict[str, Any]:
        return {f"signal_{k}": v for k, v in self.__dict__.items()}


class SignalWebhooks:
    """Args:
    pool: PostgreSQL. signal_log: the log the classifier writes.
    price: credits per delivery written on each job (the dispatcher charges it).
    batch: events per read and transaction. block_ms: how long one read waits for a new event.
    """

    def __init__(
        self,
        pool: Pool,
        signal_log: SignalLog,
        *,
        price: int = SIGNAL_DELIVERY_CREDITS,
        batch: int = 256,
        block_ms: int = 1_000,
    ) -> None:
        self.pool, self.log, self.price = pool, signal_log, price
        self.batch, self.block_ms = batch, block_ms
        self.source = signal_log.stream
        self.stats = SignalStats()

    async def position(self) -> str:
        """The id of the last event whose jobs are written; the first start stores the newest one."""
        if self.stats.position is None:
            stored = await source_position(self.pool, self.source)
            if stored is None:
                stored = await self.log.last_id()
                await save_source_position(self.pool, self.source, stored)
            self.stats.position = stored
        return self.stats.position

    async def run_once(self, block_ms: int | None = None) -> int:
        """Read the events after the position (waiting up to ``block_ms`` for one) and write their jobs;
        how many events were read."""
        entries = await self.log.read_after(await self.position(), block_ms, self.batch)
        if not entries:
            return 0
        added = await record_signals(self.pool, self.source, [(e.id, e.event) for e in entries], self.price)
        self.stats.position = entries[-1].id
        self.stats.events += len(entries)
        self.stats.jobs_added += added
        return len(entries)

    async def run(self, stop: asyncio.Event) -> None:
        """Follow the log until ``stop`` is set; an outage backs off and reads again from the position."""
        backoff = 0.0
        while not stop.is_set():
            try:
                await self.run_once(self.block_ms)
                backoff = 0.0
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                self.stats.failures += 1
                if backoff == 0.0:
                    log.warning(
                        "signal webhooks: %s: %s; reading again from %s", type(exc).__name__, exc, self.stats.position
                    )
                backoff = min(MAX_BACKOFF_S, max(0.1, 2 * backoff))
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(stop.wait(), backoff)

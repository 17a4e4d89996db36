"""The webhook dispatcher: claims due delivery jobs, posts each one signed to its receiver, and records
what came of it.

One :class:`Dispatcher` runs many deliveries at once (``concurrency``) over one keep-alive
``aiohttp`` session; PostgreSQL decides which jobs (:func:`gateway.webhooks.store.jobs.claim`:
oldest due first, at most ``per_webhook`` of one subscription and ``per_account`` of one account's
subscriptions out at once over every dispatcher), and each claimed job is leased to this dispatcher
while it is attempted.

An attempt:

1. the URL is checked (:mod:`gateway.webhooks.targets`: ``https://``, public addresses only, again
   at connect time on the resolved addresses), unless ``allow_private``;
2. a paid (transaction or signal) job is charged once (:func:`gateway.webhooks.store.jobs.charge_each`, the
   charges asked for at once gathered by :class:`gateway.webhooks.charging.Charges`);
   an account that cannot pay pauses its subscription and nothing is sent;
3. the body (:func:`gateway.webhooks.rules.delivery_body`: the same bytes and event id on every
   attempt) is posted with docs/api.md's headers, signed now with the subscription's current secret;
   no redirect is followed, and only the first ``EXCERPT_BYTES`` of the answer are read;
4. the answer is judged (:func:`judge`): 2xx delivered; 408, 429 and 5xx, a timeout or a failed
   connection are retried on the ``retry`` schedule (the ``Retry-After`` of a 429 or 503 honoured), until it gives up
   and the job is dead; any other answer (3xx, 4xx) is final: dead at once. A refused target is
   dead at once, the reason in ``last_error``. A paid job that ends dead keeps its charge if any
   attempt reached the receiver (a connection was had and the request written on it: answered or
   not), and is refunded otherwise; ``pause_after_dead`` dead jobs of one subscription in a row pause
   it (:func:`gateway.webhooks.store.jobs.record`).

Outcomes are written in batches, by the next claim's statement (:func:`gateway.webhooks.store.jobs.exchange`:
the outcomes that came in since the last one, then the claim, in one round trip), or on their own when
the queue has no room for a claim. A dispatcher that dies loses only what it had not written: those jobs
are claimed again once their lease passes and delivered again (receivers de-duplicate with
``X-Webhook-Event-Id``). One that is stopped gives back the jobs it had not started, lets attempts under
way finish for ``drain_s`` and writes their outcomes.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from datetime import UTC
from email.utils import parsedate_to_datetime
from typing import Any

import aiohttp
import orjson

from gateway.base.log_throttle import LogThrottle
from gateway.core.credits import EventHook, no_events
from gateway.storage.connections import Pool
from gateway.storage.errors import StoreUnavailable
from gateway.webhooks import metrics, targets
from gateway.webhooks.charging import Charges
from gateway.webhooks.rules import (
    EVENT_ID_HEADER,
    MAX_RETRY_AFTER_S,
    SIGNATURE_HEADER,
    TIMESTAMP_HEADER,
    WEBHOOK_ID_HEADER,
    delivery_body,
    event_id,
    retry_delay_s,
    signature,
)
from gateway.webhooks.store.jobs import (
    Charge,
    ClaimedJob,
    ClaimRules,
    HeldConnection,
    Outcome,
    Result,
    exchange,
    release,
    settle,
)
from gateway.webhooks.validation import url_problem

log = logging.getLogger(__name__)

USER_AGENT = "solana-credit-gateway-webhooks/1"
#: Bytes of the receiver's answer kept (``response_excerpt``); the rest is never read.
EXCERPT_BYTES = 512
#: Answers worth another attempt besides 5xx: the receiver timed out, or asked to slow down.
RETRY_STATUSES = frozenset({408, 429})
#: Answers whose ``Retry-After`` is honoured.
RETRY_AFTER_STATUSES = frozenset({429, 503})
ERROR_CHARS = 500
STORE_RETRY_S = 2.0
#: How long fewer outcomes than a claim's worth wait for more before they are written.
WRITE_EVERY_S = 0.01
#: What a lease keeps besides the attempts a claimed job may wait for and its own (see ``in_hand``).
LEASE_MARGIN_S = 5.0
#: The most rounds of ``concurrency`` jobs a dispatcher holds, the lease permitting: its queue must outlast a
#: claim's round trip under load (10-15 ms here while the workers finish 6,000 deliveries a second), or the
#: workers wait for claims; with three rounds they were all busy 65-69% of the time, with five 97-99%
#: (bench/README.md, Webhooks, 2026-11-26).
IN_HAND_ROUNDS = 5

#: :func:`url_problem` depends on the URL alone (DNS is checked at connect), so each subscription's URL
#: is checked once per dispatcher instead of on every attempt (3% of a busy dispatcher's time).
_url_problem = functools.lru_cache(maxsize=4096)(url_problem)

#: ``retry(attempts, retry_after_s)``: seconds until the next attempt after ``attempts`` failed ones
#: (the receiver's ``Retry-After``, if it sent one), or None: give up, the job is dead.
RetryPolicy = Callable[[int, float | None], float | None]


def fixed_delays(delays: Sequence[float], max_retry_after_s: float = MAX_RETRY_AFTER_S) -> RetryPolicy:
    """A schedule without jitter: ``delays[n - 1]`` after the n-th failed attempt, dead after
    ``len(delays) + 1`` attempts; a longer ``Retry-After`` wins up to ``max_retry_after_s``.
    (Tests and benchmarks; the service uses :func:`gateway.webhooks.rules.retry_delay_s`.)"""
    schedule = tuple(float(d) for d in delays)

    def retry(attempts: int, retry_after_s: float | None) -> float | None:
        if attempts > len(schedule):
            return None
        delay = schedule[max(0, attempts - 1)]
        if retry_after_s is not None:
            delay = max(delay, min(retry_after_s, max_retry_after_s))
        return delay

    return retry


@dataclass(frozen=True)
class DispatchConfig:
    concurrency: int = 64  # deliveries in flight in this dispatcher
    per_webhook: int = 8  # deliveries in flight to one subscription, over all dispatchers
    per_account: int | None = None  # to one account's subscriptions together, over all dispatchers (None: no cap)
    total_slots: int | None = (
        None  # every dispatcher's slots together, each account's share cut from them (None: this one's)
    )
    pause_after_dead: int = 0  # dead deliveries of one subscription in a row that pause it (0: never)
    timeout_s: float = 10.0  # one attempt, from connecting to the end of the answer's excerpt
    lease_s: float = 60.0  # how long a claim is this dispatcher's
    allow_private: bool = False  # development: http:// and loopback or private targets
    poll_s: float = 0.25  # how often an idle dispatcher looks for due jobs
    claim_batch: int = 128  # jobs claimed at most at once
    drain_s: float = 5.0  # on stop, how long deliveries in flight may still finish

    def __post_init__(self) -> None:
        account_cap = 1 if self.per_account is None else self.per_account
        if min(self.concurrency, self.per_webhook, self.claim_batch, account_cap) < 1:
            raise ValueError("concurrency, per_webhook, per_account and claim_batch must be at least 1")
        if self.pause_after_dead < 0:
            raise ValueError("pause_after_dead must be 0 (never) or more")
        if self.lease_s < 2 * self.timeout_s:
            # The lease covers the charge, the attempt and the write of its outcome: a lease that can
            # pass during an attempt lets a second dispatcher deliver the job at the same time.
            raise ValueError(f"lease_s ({self.lease_s:g}) must be at least twice timeout_s ({self.timeout_s:g})")

    @property
    def in_hand(self) -> int:
        """Jobs claimed and not finished a dispatcher may hold: its workers' and up to four times as many
        queued (``IN_HAND_ROUNDS``), as long as the lease covers the wait. A queued job starts once the
        jobs ahead of it have; with ``n × concurrency`` in hand that is within ``n - 1`` attempts of every
        worker, so it is done within ``n × timeout_s``, which must stay ``LEASE_MARGIN_S`` short of the
        lease (its charge and the write of its outcome come on top)."""
        rounds = int((self.lease_s - LEASE_MARGIN_S) // self.timeout_s)
        return max(1, min(IN_HAND_ROUNDS, rounds)) * self.concurrency

    @property
    def claim_rules(self) -> ClaimRules:
        """How this dispatcher's claims lease jobs (:func:`gateway.webhooks.store.jobs.claim`)."""
        return ClaimRules(self.lease_s, self.per_webhook, self.per_account, self.total_slots or self.concurrency)

    @property
    def min_claim(self) -> int:
        """Free slots worth a claim while deliveries are out (fewer would be a claim per delivery): half
        the workers, or half the queue beyond them when that is more, so the other half keeps the workers
        busy while the claim is under way. Each claim costs PostgreSQL about a millisecond whatever its
        size (it counts every job out), so fewer, larger claims cost less per delivery (bench/README.md,
        Webhooks, 2026-11-25)."""
        return max(1, min(self.claim_batch, max(self.concurrency, self.in_hand - self.concurrency) // 2))


@dataclass
class DispatchStats:
    claimed: int = 0
    delivered: int = 0
    retried: int = 0
    dead: int = 0
    unpaid: int = 0  # left pending: the account could not pay, its subscription paused
    lost: int = 0  # claims that were no longer this dispatcher's when it wrote their outcome
    claims: int = 0
    flushes: int = 0

    def as_dict(self) -> dict[str, int]:
        return asdict(self)


@dataclass(frozen=True)
class Verdict:
    result: Result
    reason: str | None = None
    retry_after_s: float | None = None


def judge(status: int, retry_after: str | None = None, now: float | None = None) -> Verdict:
    """What a receiver's HTTP status means for the job."""
    if 200 <= status < 300:
        return Verdict(Result.DELIVERED)
    if status in RETRY_STATUSES or status >= 500:
        wait = parse_retry_after(retry_after, now) if status in RETRY_AFTER_STATUSES else None
        return Verdict(Result.RETRY, f"HTTP {status}", wait)
    if 300 <= status < 400:
        return Verdict(Result.DEAD, f"HTTP {status}: redirects are not followed")
    return Verdict(Result.DEAD, f"HTTP {status}")


def parse_retry_after(value: str | None, now: float | None = None) -> float | None:
    """``Retry-After`` in seconds: delta seconds or an HTTP date; None when absent or unreadable."""
    if not value:
        return None
    value = value.strip()
    if value.isascii() and value.isdigit():  # a receiver's text: ASCII digits, at most 8 (the delay is capped)
        return float(value) if len(value) <= 8 else None
    try:
        when = parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return max(0.0, when.timestamp() - (time.time() if now is None else now))


def outcome_of(job: ClaimedJob, verdict: Verdict, retry: RetryPolicy, **answer: Any) -> Outcome:
    """The outcome to record: a retry the schedule has no room for is dead."""
    if verdict.result is not Result.RETRY:
        return Outcome(job.id, job.attempts, verdict.result, error=verdict.reason, **answer)
    delay = retry(job.attempts, verdict.retry_after_s)
    if delay is None:
        error = f"{verdict.reason}; gave up after {job.attempts} attempts"
        return Outcome(job.id, job.attempts, Result.DEAD, error=error, **answer)
    return Outcome(job.id, job.attempts, Result.RETRY, error=verdict.reason, delay_s=delay, **answer)


class Dispatcher:
    """Delivers due jobs until ``run``'s stop event is set; see the module docstring.

    ``concurrency`` workers take claimed jobs from a local queue that the exchange loop keeps filled
    (:attr:`DispatchConfig.in_hand`), so a worker that finishes starts the next job at once instead
    of waiting for a claim (a claim is a few milliseconds, more on a busy machine), and the queue is
    short enough for every job in it to be done within its lease.
    """

    def __init__(
        self,
        pool: Pool,
        dispatcher_id: str,
        config: DispatchConfig | None = None,
        *,
        retry: RetryPolicy = retry_delay_s,
        events: EventHook = no_events,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.pool = pool
        self.id = dispatcher_id
        self.config = config or DispatchConfig()
        self.retry = retry
        self.events = events
        self.clock = clock
        self.stats = DispatchStats()
        self._ready: asyncio.Queue[ClaimedJob] = asyncio.Queue()
        self._in_hand, self._min_claim = self.config.in_hand, self.config.min_claim  # read on every job
        self._attempting = 0
        self._unwritten = 0  # attempted, outcome not written yet
        self._outcomes: list[Outcome] = []  # of those, the ones no exchange has taken yet
        # Work for the exchange loop: a worker finished a job (room for a claim), or outcomes came in.
        self._wake = asyncio.Event()
        self._idle = asyncio.Event()  # no attempt under way
        self._session: aiohttp.ClientSession | None = None
        # The exchange loop's statements (outcomes written, jobs claimed: one round trip), on a connection kept.
        self._conn = HeldConnection(pool)
        self._charges = Charges(pool, dispatcher_id, events)  # the paid jobs' charges, gathered per account
        # Failed attempts' warnings: the first of each outcome (retry, dead), then one per 10 s with how many
        # were left out. A tenant's dead receivers could fail thousands a second; each outcome is in its
        # delivery's record and in gateway_webhook_deliveries_total (docs/operations.md, Logs).
        self.failures = LogThrottle(log)

    @property
    def in_flight(self) -> int:
        """Claimed jobs this dispatcher still answers for: queued, being attempted, outcome unwritten."""
        return self._ready.qsize() + self._attempting + self._unwritten

    async def run(self, stop: asyncio.Event) -> None:
        """Claim and deliver until ``stop``; then give back the jobs not started, let attempts under way
        finish (up to ``drain_s``) and write their outcomes. Cancelled instead, it ends at once and
        writes nothing more: its jobs are claimed again when their lease passes."""
        c = self.config
        self._session = aiohttp.ClientSession(
            connector=targets.connector(c.concurrency, c.allow_private),
            timeout=aiohttp.ClientTimeout(total=c.timeout_s),
            headers={"User-Agent": USER_AGENT},
            cookie_jar=aiohttp.DummyCookieJar(),  # a receiver's cookies never reach another receiver
            auto_decompress=False,  # only an excerpt is kept: no receiver decides what is inflated here
        )
        workers = [asyncio.create_task(self._work()) for _ in range(c.concurrency)]
        starved = False  # the last claim found fewer jobs than it asked for
        try:
            while not stop.is_set():
                self._wake.clear()
                room = self._room() >= c.min_claim
                if len(self._outcomes) >= c.min_claim or (room and not starved):
                    full = await self._exchange(room)
                    starved = room and not full
                    if full:
                        await asyncio.sleep(0)
                        continue
                elif self._outcomes:
                    # A few outcomes wait a little for more, so one statement writes them all; a claim's
                    # worth goes at once (until written, a failed one holds its subscription's slot).
                    await _first_of(stop, self._wake, WRITE_EVERY_S)
                    room = self._room() >= c.min_claim
                    starved = room and not await self._exchange(room)
                    continue
                if not await _first_of(stop, self._wake, c.poll_s):
                    starved = False  # polled: look for due jobs again
            await self._drain(workers)
        finally:
            for task in workers:
                task.cancel()
            await asyncio.gather(*workers, return_exceptions=True)
            await self._charges.close()
            await self._session.close()
            await self._conn.drop()

    async def _exchange(self, claim: bool) -> bool:
        """Write every outcome that came in since the last exchange and, when ``claim``, claim what the
        queue has room for, in one round trip (:func:`gateway.webhooks.store.jobs.exchange`); True when the
        claim was full (more may be due)."""
        c = self.config
        batch, self._outcomes = self._outcomes, []
        want = min(self._room(), c.claim_batch) if claim else 0
        try:
            conn = await self._conn.get()
            jobs, written = await exchange(conn, self.id, batch, c.pause_after_dead, want, c.claim_rules)
        except Exception as exc:
            await self._keep_unwritten(exc, batch)
            return False
        if want:
            self.stats.claims += 1
            self.stats.claimed += len(jobs)
            for job in jobs:
                self._ready.put_nowait(job)
        if len(written) < len(batch):  # dead ones to refund, late ones of cancelled jobs
            try:
                written = await settle(conn, self.id, batch, written, c.pause_after_dead)
            except Exception as exc:
                await self._keep_unwritten(exc, [o for o in batch if o.job_id not in written], claimed=len(jobs))
                batch = [o for o in batch if o.job_id in written]
        if batch:
            self._count(batch, written)
        return bool(want) and len(jobs) == want

    async def _keep_unwritten(self, exc: Exception, batch: list[Outcome], claimed: int = 0) -> None:
        """Keep ``batch`` to write later (if the leases pass first, its jobs are delivered again), take
        another connection, and wait a little."""
        self._outcomes[:0] = batch
        if isinstance(exc, StoreUnavailable):
            log.warning("webhook dispatcher %s: %d outcomes not written yet: %s", self.id, len(batch), exc)
        else:  # a bug: logged, and the loop goes on (the next exchange may succeed)
            log.error("webhook dispatcher %s: %d outcomes not written", self.id, len(batch), exc_info=exc)
        await self._conn.drop()
        if not claimed:
            await asyncio.sleep(STORE_RETRY_S)

    def _count(self, batch: list[Outcome], written: set[int]) -> None:
        self.stats.flushes += 1
        counts = Counter(outcome.result.value if outcome.job_id in written else "lost" for outcome in batch)
        for outcome_name, n in counts.items():
            metrics.WEBHOOK_DELIVERIES.inc((outcome_name,), n)
        self.stats.delivered += counts[Result.DELIVERED.value]
        self.stats.retried += counts[Result.RETRY.value]
        self.stats.dead += counts[Result.DEAD.value]
        self.stats.lost += counts["lost"]
        self._unwritten -= len(batch)

    def _room(self) -> int:
        """Jobs the queue can take (see :attr:`DispatchConfig.in_hand`)."""
        return self._in_hand - self._ready.qsize() - self._attempting

    async def _work(self) -> None:
        while True:
            job = await self._ready.get()
            self._attempting += 1
            try:
                outcome = await self._attempt_safely(job)
            finally:
                self._attempting -= 1
                if not self._attempting:
                    self._idle.set()
            if outcome is not None:
                if outcome.result is not Result.DELIVERED:  # the reason last_error records; never the secret
                    self.failures.warning(
                        outcome.result.value,
                        "webhook %s delivery %s attempt %d failed (%s): %s",
                        job.webhook_id,
                        job.id,
                        job.attempts,
                        outcome.result.value,
                        outcome.error,
                    )
                self._unwritten += 1
                self._outcomes.append(outcome)
            # Wake the exchange loop only when it has work: room for a claim, the first outcome (it waits
            # a little for more), or a claim's worth of them.
            waiting = len(self._outcomes)
            if waiting == 1 or waiting >= self._min_claim or self._room() >= self._min_claim:
                self._wake.set()

    async def _attempt_safely(self, job: ClaimedJob) -> Outcome | None:
        try:
            return await self.attempt(job)
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # a bug or a store failure: retried like a failed attempt
            log.exception("webhook delivery %s failed in the dispatcher", job.id)
            return outcome_of(job, Verdict(Result.RETRY, f"dispatcher error: {type(exc).__name__}"), self.retry)

    async def attempt(self, job: ClaimedJob) -> Outcome | None:
        """One attempt of a claimed job; None when nothing was attempted and there is nothing to
        record (the account could not pay, or the claim was lost)."""
        refusal = _url_problem(job.url, self.config.allow_private)  # as at creation: DNS is checked at connect
        if refusal is not None:
            return Outcome(job.id, job.attempts, Result.DEAD, error=f"refused: {refusal}")
        # A free (lifecycle) job of an account suspended at the claim takes the charge's path, which
        # pauses its subscription; one of an account in good standing goes out without a round trip.
        if job.charged == 0 and (job.price > 0 or job.suspended):
            paid = await self._charges.charge(job)
            if paid is Charge.UNPAID:
                self.stats.unpaid += 1
                return None
            if paid is Charge.LOST:
                self.stats.lost += 1
                return None
        body = delivery_body(job.webhook_id, job.id, job.event_type, _payload(job.payload), job.created_at)
        return await self._post(job, body)

    async def _post(self, job: ClaimedJob, body: bytes) -> Outcome:
        assert self._session is not None, "attempts run inside run()"
        event = event_id(job.webhook_id, job.id)
        timestamp = int(self.clock())
        headers = {
            SIGNATURE_HEADER: signature(job.secret, event, timestamp, body),
            TIMESTAMP_HEADER: str(timestamp),
            EVENT_ID_HEADER: event,
            WEBHOOK_ID_HEADER: str(job.webhook_id),
            "Content-Type": "application/json",
        }
        with targets.reaching() as reached:
            try:
                async with self._session.post(job.url, data=body, headers=headers, allow_redirects=False) as resp:
                    excerpt = await read_excerpt(resp)
                    status = resp.status
                    if 200 <= status < 300:  # judge's first case, without its header read and retry policy
                        return Outcome(job.id, job.attempts, Result.DELIVERED, status, None, excerpt, sent=True)
                    verdict = judge(status, resp.headers.get("Retry-After"), self.clock())
                    return outcome_of(job, verdict, self.retry, http_status=status, excerpt=excerpt, sent=True)
            except (TimeoutError, aiohttp.ClientError, OSError) as exc:
                return outcome_of(job, self._failed(exc), self.retry, sent=reached.connected)

    def _failed(self, exc: BaseException) -> Verdict:
        """What an attempt that got no answer comes to."""
        if isinstance(exc, TimeoutError):
            return Verdict(Result.RETRY, f"no answer within {self.config.timeout_s:g} s")
        if isinstance(exc, aiohttp.InvalidURL):
            return Verdict(Result.DEAD, f"refused: not a valid URL ({_short(exc)})")
        refusal = targets.refusal_of(exc)
        if refusal is not None:
            return Verdict(Result.DEAD, f"refused: {refusal}")
        return Verdict(Result.RETRY, f"connection failed: {_short(exc)}")

    async def _drain(self, workers: list[asyncio.Task[None]]) -> None:
        """Give back the jobs not started, let attempts under way finish for ``drain_s`` (the rest are
        cancelled: their jobs stay leased until the lease passes), then write every outcome."""
        unstarted: list[ClaimedJob] = []
        while not self._ready.empty():
            unstarted.append(self._ready.get_nowait())
        try:
            await release(self.pool, self.id, unstarted)
        except StoreUnavailable as exc:
            log.warning(
                "webhook dispatcher %s: %d jobs kept until their lease passes: %s", self.id, len(unstarted), exc
            )
        if self._attempting:
            self._idle.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._idle.wait(), self.config.drain_s)
        for task in workers:
            task.cancel()
        await asyncio.gather(*workers, return_exceptions=True)
        if self._outcomes:
            await self._exchange(claim=False)


async def read_excerpt(resp: aiohttp.ClientResponse) -> str:
    """Up to ``EXCERPT_BYTES`` of the answer, as text; a body that stalls or breaks keeps what came."""
    data = b""
    with contextlib.suppress(TimeoutError, aiohttp.ClientError):
        while len(data) < EXCERPT_BYTES and not resp.content.at_eof():
            chunk = await resp.content.read(EXCERPT_BYTES - len(data))
            if not chunk:
                break
            data += chunk
    return data.decode("utf-8", "replace").replace("\x00", "\ufffd")  # PostgreSQL text holds no NUL


def _payload(text: str) -> Any:
    try:
        return orjson.loads(text)
    except orjson.JSONDecodeError:  # a number orjson cannot hold (beyond 64 bits): sent as stored
        return orjson.Fragment(text)


def _short(exc: BaseException) -> str:
    return (str(exc) or type(exc).__name__)[:ERROR_CHARS]


async def _first_of(a: asyncio.Event, b: asyncio.Event, timeout_s: float) -> bool:
    """Wait until either event is set, at most ``timeout_s``; whether one was."""
    waits = [asyncio.ensure_future(a.wait()), asyncio.ensure_future(b.wait())]
    try:
        done, _ = await asyncio.wait(waits, timeout=timeout_s, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for w in waits:
            w.cancel()
    return bool(done)

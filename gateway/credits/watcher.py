"""Crediting USDC deposits: the watcher that follows the deposit address, and ``POST /account/confirm-deposit``.

Both paths read the same finalized transaction, find the same transfers (:mod:`gateway.core.deposits`)
and hand them to :func:`gateway.credits.store.credit_deposit`, whose unique constraint on the signature
makes "credited at most once, whichever path sees it first" hold without any coordination here.

The watcher polls ``getSignaturesForAddress`` on the deposit token account (commitment finalized, ``until``
its cursor), processes the new signatures oldest first and moves the cursor (a row in PostgreSQL) past
each one only once it is fully credited, so a crash or restart resumes and at worst re-offers a signature
that is then reported as already processed. Only finalized transactions are credited: a signature that is
not finalized yet stops the pass and is seen again at the next poll.

Transactions are fetched ``concurrency`` at a time and credited in order, so a burst of transfers
(dust included: each is recorded as ignored, once) does not queue real deposits behind one node
round trip each. A signature that keeps failing for any reason but a store or node outage is skipped
after ``max_attempts`` passes (logged as an error; ``confirm-deposit`` can still credit it), so one
bad transaction never blocks every later deposit. An outage stops the pass without counting.

With a pool of several nodes a pass reads one node's view (:func:`gateway.node.pool.one_node_of`): a
signature listed by one node and fetched from another a few slots behind would read as null, "not
readable", and be skipped after ``max_attempts``. A pass whose node fails stops; the next is on the node
first then.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from gateway.core.credits import CreditPolicy, EventHook, no_events
from gateway.core.deposits import scan_deposits
from gateway.credits import metrics
from gateway.credits.chain_reads import (
    RPC_TIMEOUT_S,
    deposit_credits,
    get_finalized_transaction,
)
from gateway.credits.store import credit_deposit, save_watch_cursor, watch_cursor
from gateway.node.http import ChainError, Upstream, UpstreamTimeout, UpstreamUnavailable, rpc_call
from gateway.node.pool import NoNode, one_node_of
from gateway.storage.connections import Pool
from gateway.storage.errors import StoreUnavailable

log = logging.getLogger(__name__)


@dataclass
class WatcherStats:
    """What the watcher did, for the actor's ``status()`` and for logs."""

    polls: int = 0
    signatures_processed: int = 0
    deposits_credited: int = 0
    credits_added: int = 0
    last_poll_at: float | None = None
    last_error: str | None = None
    skipped: list[str] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        return {
            "polls": self.polls,
            "signatures_processed": self.signatures_processed,
            "deposits_credited": self.deposits_credited,
            "credits_added": self.credits_added,
            "last_poll_at": self.last_poll_at,
            "last_error": self.last_error,
            "skipped": list(self.skipped),
        }


class DepositWatcher:
    """Follows the deposit token account and credits each finalized USDC transfer into it (no Ray here)."""

    def __init__(
        self,
        pool: Pool,
        upstream: Upstream,
        policy: CreditPolicy,
        deposit_ata: str,
        usdc_mint: str,
        *,
        page_limit: int = 1000,
        timeout_s: float = RPC_TIMEOUT_S,
        max_attempts: int = 30,
        concurrency: int = 8,
        events: EventHook = no_events,
        after_credit: Callable[[str], Awaitable[None]] | None = None,
    ) -> None:
        self.pool = pool
        self.upstream = upstream
        self.policy = policy
        self.deposit_ata = deposit_ata
        self.usdc_mint = usdc_mint
        self.page_limit = page_limit
        self.timeout_s = timeout_s
        self.max_attempts = max_attempts
        self.concurrency = concurrency
        self.events = events
        self.after_credit = after_credit
        self.stats = WatcherStats()
        self._attempts: dict[str, int] = {}
        self._lock = asyncio.Lock()  # one pass at a time: overlapping passes would move the cursor back

    async def cursor(self) -> str | None:
        """The newest signature fully processed, or None before the first one."""
        return await watch_cursor(self.pool, self.deposit_ata)

    async def _save_cursor(self, signature: str, slot: int | None) -> None:
        await save_watch_cursor(self.pool, self.deposit_ata, signature, slot)

    async def _new_signatures(self, node: Upstream, until: str | None) -> list[dict[str, Any]]:
        """Signatures newer than ``until``, newest first (the node's order), across as many pages as needed."""
        found: list[dict[str, Any]] = []
        before: str | None = None
        while True:
            cfg: dict[str, Any] = {"commitment": "finalized", "limit": self.page_limit}
            if until:
                cfg["until"] = until
            if before:
                cfg["before"] = before
            page = await rpc_call(node, "getSignaturesForAddress", [self.deposit_ata, cfg], self.timeout_s)
            if not isinstance(page, list):
                raise ChainError(None, "getSignaturesForAddress: expected a list")
            entries = [e for e in page if isinstance(e, dict) and isinstance(e.get("signature"), str)]
            found.extend(entries)
            if len(page) < self.page_limit or not entries:
                return found
            before = entries[-1]["signature"]

    async def run_once(self) -> int:
        """One poll: credit what is new and finalized; return how many signatures were processed."""
        async with self._lock:
            return await self._pass()

    async def _pass(self) -> int:
        self.stats.polls += 1
        self.stats.last_error = None
        self.stats.last_poll_at = time.time()
        node = await one_node_of(self.upstream)  # one node's view: what it lists, it can fetch
        entries = await self._new_signatures(node, await self.cursor())
        metrics.DEPOSIT_POLLED.set(time.time())
        ready: list[dict[str, Any]] = []
        for entry in reversed(entries):  # oldest first
            status = entry.get("confirmationStatus")
            if status is not None and status != "finalized":
                break  # later ones are younger still; all are seen again next poll
            ready.append(entry)
        processed = 0
        try:
            for start in range(0, len(ready), self.concurrency):
                chunk = ready[start : start + self.concurrency]
                fetched = await asyncio.gather(*(self._fetch(node, entry) for entry in chunk))
                for entry, tx in zip(chunk, fetched, strict=True):
                    signature: str = entry["signature"]
                    if not await self._process(signature, tx):
                        return processed
                    slot = entry.get("slot")
                    await self._save_cursor(signature, slot if isinstance(slot, int) else None)
                    self._attempts.pop(signature, None)
                    processed += 1
        finally:
            self.stats.signatures_processed += processed
        return processed

    async def _fetch(self, node: Upstream, entry: dict[str, Any]) -> dict[str, Any] | str | None:
        """The finalized transaction, None for one that failed on chain (nothing to credit), or why it
        could not be read."""
        if entry.get("err") is not None:
            return None
        try:
            tx = await get_finalized_transaction(node, entry["signature"], self.timeout_s)
        except ChainError as exc:
            return str(exc)
        return tx if tx is not None else "getTransaction returned null for a finalized signature"

    async def _process(self, signature: str, tx: dict[str, Any] | str | None) -> bool:
        """Credit one transaction's transfers; False means "stop here and retry this one later"."""
        if tx is None:
            return True
        if isinstance(tx, str):
            return self._give_up(signature, tx)
        try:
            await self._credit(signature, tx)
        except (StoreUnavailable, UpstreamUnavailable, UpstreamTimeout):
            raise  # an outage: the whole pass waits for it, and nothing is skipped
        except Exception as exc:  # this deposit, again and again: count it, then let the rest through
            log.exception("crediting deposit %s failed", signature)
            return self._give_up(signature, f"{type(exc).__name__}: {exc}")
        return True

    async def _credit(self, signature: str, tx: dict[str, Any]) -> None:
        scan = scan_deposits(tx, self.deposit_ata, self.usdc_mint)
        slot = tx.get("slot")
        for credit in deposit_credits(signature, slot if isinstance(slot, int) else None, scan.transfers):
            outcome = await credit_deposit(self.pool, credit, self.policy, self.events)
            if outcome.credited:
                self.stats.deposits_credited += 1
                self.stats.credits_added += outcome.credits_added
                log.info(
                    "deposit %s: %d base units from %s, %d credits",
                    credit.signature,
                    credit.amount_base_units,
                    credit.pubkey,
                    outcome.credits_added,
                )
                if self.after_credit is not None:
                    await self.after_credit(credit.pubkey)
            elif outcome.ignored_reason:
                log.info("deposit %s from %s not credited: %s", credit.signature, credit.pubkey, outcome.ignored_reason)

    def _give_up(self, signature: str, why: str) -> bool:
        """A signature that keeps failing must not block every later deposit: skip it after a while.

        It stays creditable through confirm-deposit, and the skip is logged as an error.
        """
        attempts = self._attempts.get(signature, 0) + 1
        self._attempts[signature] = attempts
        self.stats.last_error = f"{signature}: {why}"
        if attempts < self.max_attempts:
            log.warning("deposit %s not readable yet (attempt %d): %s", signature, attempts, why)
            return False
        log.error("skipping deposit signature %s after %d attempts: %s", signature, attempts, why)
        self.stats.skipped = [*self.stats.skipped[-99:], signature]
        return True

    async def run(self, interval_s: float, stop: asyncio.Event | None = None) -> None:
        """Poll every ``interval_s`` until ``stop`` is set (or the task is cancelled), surviving any error."""
        stop = stop or asyncio.Event()
        failing: str | None = None  # the node failure last logged: a streak of the same one is logged once
        while not stop.is_set():
            try:
                await self.run_once()
                if failing is not None:
                    log.info("deposit watcher: node usable again")
                    failing = None
            except asyncio.CancelledError:
                raise
            except (UpstreamUnavailable, UpstreamTimeout, ChainError, NoNode) as exc:
                self.stats.last_error = f"{type(exc).__name__}: {exc}"
                if self.stats.last_error != failing:
                    log.warning("deposit watcher: node not usable (repeats not logged): %s", exc)
                    failing = self.stats.last_error
            except Exception as exc:
                self.stats.last_error = f"{type(exc).__name__}: {exc}"
                log.exception("deposit watcher poll failed")
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), interval_s)

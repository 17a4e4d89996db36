"""The signal classifier: follows the node's confirmed blocks, classifies them, appends to the signal log.

Each poll reads the node's confirmed slot (the tip), lists the confirmed blocks after the cursor
(``getBlocks``: a skipped slot is simply not listed), fetches them (``getBlock``, ``json``, full
details, ``maxSupportedTransactionVersion: 0``, a few at a time) and appends each one's signals with
:meth:`gateway.signals.store.SignalLog.append_slot`, which moves the cursor in the same transaction:
after a crash the next classifier resumes from the stored cursor with no slot lost or written twice.

- **First start** (no cursor stored): from the tip of the first poll; earlier blocks are not read.
- **Catch-up** is bounded: at most ``max_slots_per_poll`` slots per poll, polled again at once while
  behind; a cursor more than ``max_lag_slots`` behind the tip (a long outage) jumps ahead, and the
  blocks in between are never classified (signals are a live feed, not a history).
- **Skipped and missing slots**: a slot ``getBlocks`` does not list is skipped. A listed block the node
  will never serve (cleaned up, skipped, missing in long-term storage, a transaction version above 0:
  -32001, -32007, -32009, -32015, or null) is recorded as a slot without events, with a warning; one
  it cannot serve yet (-32004, -32014) stops the poll without advancing, and after
  ``missing_retries`` polls is skipped (logged as an error). Slots below the tip that no listed block
  covers are settled (nothing will ever be confirmed there), and the cursor moves past them.
- **One node per poll**: a pool of several nodes is asked through its first node for reads only
  (:func:`gateway.node.pool.one_node_of`), so the tip and the blocks listed up to it are one node's view: a
  node a few slots behind, asked for blocks up to another's tip, would have made slots it has not reached
  look settled. When that node fails the poll raises, and the next poll is on the node first then.
- **A node behind the cursor** (a lagging fallback) is waited for: the cursor never moves back. To
  follow another chain, delete the log's keys (:mod:`gateway.signals.store`).
- **Failures**: the node or Redis unreachable, or any other error answer of the node (unhealthy,
  behind), raises out of :meth:`SignalClassifier.run_once` with nothing skipped;
  :meth:`SignalClassifier.run` waits with backoff and polls again from the stored cursor.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from dataclasses import asdict, dataclass
from typing import Any, Final

from gateway.node.http import ChainError, Upstream, UpstreamTimeout, UpstreamUnavailable, rpc_call
from gateway.node.pool import NoNode, one_node_of
from gateway.signals import metrics
from gateway.signals.rules import SignalRules, classify_block
from gateway.signals.store import CursorConflict, SignalLog
from gateway.storage.errors import StoreUnavailable

log = logging.getLogger(__name__)

DEFAULT_POLL_S: Final = 0.4
MAX_BACKOFF_S: Final = 10.0
#: The node will never serve these blocks: cleaned up, skipped, missing in long-term storage, a
#: transaction version newer than 0.
GONE_CODES: Final = frozenset({-32001, -32007, -32009, -32015})
#: The node cannot serve this block yet: not available, its status not available yet.
NOT_YET_CODES: Final = frozenset({-32004, -32014})
BLOCK_CONFIG: Final = {
    "encoding": "json",
    "transactionDetails": "full",
    "maxSupportedTransactionVersion": 0,
    "rewards": False,
    "commitment": "confirmed",
}


@dataclass
class ClassifierStats:
    """What the classifier did, for the actor's ``status()`` and for tests."""

    polls: int = 0
    slots_processed: int = 0  # blocks classified and appended
    slots_skipped: int = 0  # listed blocks the node would not serve
    events_emitted: int = 0
    first_slot: int | None = None  # the first slot this instance appended
    cursor: int | None = None
    last_poll_at: float | None = None
    last_error: str | None = None

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


class _Retry:
    """A block the node cannot serve yet."""


_RETRY: Final = _Retry()


class SignalClassifier:
    """One poll at a time (no Ray, no thread: :mod:`gateway.signals.classifier_actor` runs it)."""

    def __init__(
        self,
        log_: SignalLog,
        upstream: Upstream,
        rules: SignalRules,
        *,
        max_slots_per_poll: int = 64,
        max_lag_slots: int = 4_500,
        concurrency: int = 4,
        missing_retries: int = 25,
        timeout_s: float = 30.0,
    ) -> None:
        self.log = log_
        self.upstream = upstream
        self.rules = rules
        self.max_slots_per_poll = max_slots_per_poll
        self.max_lag_slots = max_lag_slots
        self.concurrency = concurrency
        self.missing_retries = missing_retries
        self.timeout_s = timeout_s
        self.stats = ClassifierStats()
        self.behind = False  # the last poll left confirmed slots for the next one
        self._start: int | None = None  # the first poll's tip, while no cursor is stored
        self._attempts: dict[int, int] = {}
        self._lock = asyncio.Lock()  # one poll at a time: two would race on the cursor

    async def run_once(self) -> int:
        """One poll: classify and append what is new; the number of slots the cursor moved over."""
        async with self._lock:
            self.stats.polls += 1
            return await self._poll()

    async def _poll(self) -> int:
        node = await one_node_of(self.upstream)  # one node's view: its tip, then its blocks up to it
        tip = await self._tip(node)
        cursor = await self.log.cursor()
        if cursor is None:
            self._start = tip if self._start is None else self._start
            cursor = self._start - 1
        metrics.CLASSIFIER_LAG.set(max(tip - cursor, 0))
        start = max(cursor + 1, tip - self.max_lag_slots + 1)
        end = min(tip, start + self.max_slots_per_poll - 1)
        self.behind = end < tip
        if start > end:
            return 0
        listed = await self._blocks(node, start, end)
        moved_to = cursor
        for first in range(0, len(listed), self.concurrency):
            chunk = listed[first : first + self.concurrency]
            blocks = await asyncio.gather(*(self._block(node, slot) for slot in chunk))
            for slot, block in zip(chunk, blocks, strict=True):
                if isinstance(block, _Retry):
                    self.behind = False  # the next poll waits its interval
                    return moved_to - cursor
                await self._append(slot, block)
                self.stats.slots_skipped += block is None
                moved_to = slot
        if end < tip and moved_to < end:  # the rest of the range is settled: no block will appear there
            await self._append(end, None)
            moved_to = end
        return moved_to - cursor

    async def _tip(self, node: Upstream) -> int:
        tip = await rpc_call(node, "getSlot", [{"commitment": "confirmed"}], self.timeout_s)
        if not isinstance(tip, int) or tip < 0:
            raise ChainError(None, "getSlot: expected a slot number")
        return tip

    async def _blocks(self, node: Upstream, start: int, end: int) -> list[int]:
        listed = await rpc_call(node, "getBlocks", [start, end, {"commitment": "confirmed"}], self.timeout_s)
        if not isinstance(listed, list):
            raise ChainError(None, "getBlocks: expected a list of slots")
        return sorted({s for s in listed if isinstance(s, int) and start <= s <= end})

    async def _block(self, node: Upstream, slot: int) -> dict[str, Any] | _Retry | None:
        """The block; None for one the node will never serve; ``_RETRY`` for one it cannot serve yet."""
        try:
            block = await rpc_call(node, "getBlock", [slot, BLOCK_CONFIG], self.timeout_s)
        except ChainError as exc:
            if exc.code in GONE_CODES:
                log.warning("signal classifier: slot %d has no block to read: %s", slot, exc)
                return None
            if exc.code in NOT_YET_CODES:
                return self._not_yet(slot, str(exc))
            raise  # the node failing (unhealthy, behind...): the poll stops, nothing is skipped
        if block is None:
            return None
        if not isinstance(block, dict) or not isinstance(block.get("transactions"), list):
            return self._not_yet(slot, "getBlock: not a block with transactions")
        return block

    def _not_yet(self, slot: int, why: str) -> _Retry | None:
        attempts = self._attempts.get(slot, 0) + 1
        self._attempts[slot] = attempts
        self.stats.last_error = f"slot {slot}: {why}"
        if attempts < self.missing_retries:
            log.debug("signal classifier: block %d not served yet (attempt %d): %s", slot, attempts, why)
            return _RETRY
        log.error("signal classifier: skipping slot %d after %d attempts: %s", slot, attempts, why)
        return None

    async def _append(self, slot: int, block: dict[str, Any] | None) -> None:
        events = classify_block(block, slot, self.rules) if block is not None else []
        await self.log.append_slot(slot, events)
        self._attempts.pop(slot, None)
        stats = self.stats
        stats.slots_processed += block is not None
        stats.events_emitted += len(events)
        stats.first_slot = slot if stats.first_slot is None else stats.first_slot
        stats.cursor = slot

    async def run(self, interval_s: float = DEFAULT_POLL_S, stop: asyncio.Event | None = None) -> None:
        """Poll every ``interval_s`` (at once while behind) until ``stop`` is set, surviving any error."""
        stop = stop or asyncio.Event()
        backoff = interval_s
        failing: str | None = None  # the failure last logged: a streak of the same one is logged once
        while not stop.is_set():
            delay = interval_s
            try:
                await self.run_once()
                if failing is not None:
                    log.info("signal classifier: polling again")
                failing, backoff = None, interval_s
                delay = 0 if self.behind else interval_s
            except asyncio.CancelledError:
                raise
            except (UpstreamUnavailable, UpstreamTimeout, ChainError, StoreUnavailable, CursorConflict, NoNode) as exc:
                self.stats.last_error = f"{type(exc).__name__}: {exc}"
                if self.stats.last_error != failing:
                    log.warning("signal classifier: %s (repeats not logged; retrying with backoff)", exc)
                    failing = self.stats.last_error
                delay, backoff = backoff, min(backoff * 2, MAX_BACKOFF_S)
            except Exception as exc:
                self.stats.last_error = f"{type(exc).__name__}: {exc}"
                log.exception("signal classifier poll failed")
                delay, backoff = backoff, min(backoff * 2, MAX_BACKOFF_S)
            self.stats.last_poll_at = time.time()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), delay)

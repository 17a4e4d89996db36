"""The launch feed's scheduler: `LaunchFeed` decides what happens each step (a create, a buy, a whale buy
that completes a curve, a sell, or a due graduation), has the builders produce it, and injects the result
into the chain every `interval_ms`. The chain tells it of every transaction it records (`_ForeignChanges`): the
accounts that other transactions changed are read back at the start of the next step. With a `run_file` (the
devnode's `<data_dir>/feed.json`) each start is a new run of the seed (`next_run`), so a restarted devnode goes
on with new coins instead of launching the same ones again.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from solders.account import Account
from solders.pubkey import Pubkey

from devnode.feed.assemble import finish
from devnode.feed.create import create
from devnode.feed.migrate import migrate
from devnode.feed.state import ChainLike, Coin, FeedState, Tx
from devnode.feed.trade import buy, sell, whale_buy
from devnode.injected import InjectedTransaction
from devnode.records import TxRecord

logger = logging.getLogger(__name__)


@runtime_checkable
class _Observable(Protocol):
    """A chain that tells listeners of each transaction it records (devnode.chain.Chain does)."""

    def add_listener(self, listener: Any) -> None: ...


class _ForeignChanges:
    """Told by the chain of every transaction it records; keeps the accounts changed by those the feed did not
    make (its own signatures are in `FeedState.seen`). Called inside the chain: it only takes note."""

    def __init__(self, state: FeedState) -> None:
        self._state = state
        self._changed: dict[Pubkey, None] = {}

    def on_transaction(self, rec: TxRecord, changed: list[tuple[Pubkey, Account | None]]) -> None:
        if rec.signature not in self._state.seen:
            self._changed.update(dict.fromkeys(key for key, _ in changed))

    def on_slot(self, slot: int, parent: int, root: int) -> None:
        pass

    def take(self) -> list[Pubkey]:
        changed, self._changed = list(self._changed), {}
        return changed


def next_run(run_file: Path) -> int:
    """The number of this start of the feed on the chain `run_file` sits beside (0 for the first), written
    back before anything is injected: a crash after it still moves the next start on to a new run."""
    try:
        run = int(json.loads(run_file.read_text())["runs"])
    except FileNotFoundError:
        run = 0
    tmp = run_file.with_name(run_file.name + ".tmp")
    tmp.write_text(json.dumps({"version": 1, "runs": run + 1}))
    os.replace(tmp, run_file)
    return run


class LaunchFeed:
    """A steady, seeded stream of pump.fun-shaped transactions injected into the chain.

    `next_transactions()` is the pure step (it only reads the chain, plus airdrops to fund the generated
    traders once); `start()` runs it every `interval_ms` and injects what it returns. `run_file` (a JSON
    file kept with the chain's state) counts the feed's starts: without it every feed of a seed is run 0.
    """

    def __init__(
        self,
        chain: ChainLike,
        seed: int = 7,
        interval_ms: int = 1000,
        *,
        clock: Callable[[], float] = time.time,
        run_file: Path | None = None,
    ) -> None:
        self._chain = chain
        self.run = 0 if run_file is None else next_run(run_file)
        self._state = FeedState(chain, seed, self.run)
        self._interval_ms = interval_ms
        self._clock = clock
        self._task: asyncio.Task[None] | None = None
        self.counts = self._state.counts
        self._foreign = _ForeignChanges(self._state)
        if isinstance(chain, _Observable):
            # For the feed's life, started or not: a paused feed resumes from what the chain became meanwhile.
            chain.add_listener(self._foreign)

    # ------------------------------------------------------------------ public

    @property
    def traders(self) -> list[Pubkey]:
        return [kp.pubkey() for kp in self._state.traders]

    async def start(self) -> None:
        if self._task is None or self._task.done():
            self._task = asyncio.create_task(self._run(), name="launch-feed")

    async def stop(self) -> None:
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task

    def next_transactions(self) -> list[InjectedTransaction]:
        """One step of the stream: 1-3 transactions (plus a due graduation), not yet injected."""
        state = self._state
        state.refresh(self._foreign.take())  # every transaction injected so far has landed: the chain is the truth
        state.fund_traders()
        state.step += 1
        blockhash = self._chain.latest_blockhash()
        now = int(self._clock())
        out: list[InjectedTransaction] = []
        due = [m for step, m in state.graduations if step <= state.step]
        if due:
            state.graduations = [(s, m) for s, m in state.graduations if m != due[0]]
            if due[0] in state.coins:
                out.append(finish(state, migrate(state, state.coins[due[0]], now), blockhash))
        for _ in range(state.rng.choice((1, 1, 2, 2, 3))):
            # Each transaction is finished (its writes taken) before the next one changes the state.
            tx = self._next_action(now)
            if tx is not None:
                out.append(finish(state, tx, blockhash))
        return out

    # ------------------------------------------------------------------ loop

    async def _run(self) -> None:
        while True:
            try:
                for itx in self.next_transactions():
                    try:
                        self._chain.inject(itx)
                    except Exception:
                        logger.exception("launch feed: the chain rejected an injected transaction")
            except Exception:
                # NOTE: the feed is background traffic; a bad step must not stop it.
                logger.exception("launch feed: step failed")
            await asyncio.sleep(self._interval_ms / 1000)

    # ------------------------------------------------------------------ choosing what happens

    def _next_action(self, now: int) -> Tx | None:
        state = self._state
        live = state.live_coins()
        roll = state.rng.random()
        if not live or roll < 0.14:
            return create(state, now)
        coin = self._pick_coin(live)
        if roll < 0.15:
            return whale_buy(state, coin, now)
        holdings = [
            t for t in state.tokens.values() if t.mint == coin.mint and t.amount > 0 and t.owner != coin.bonding_curve
        ]
        if roll < 0.6 or not holdings:
            return buy(state, coin, now)
        return sell(state, coin, state.rng.choice(holdings), now)

    def _pick_coin(self, live: list[Coin]) -> Coin:
        recent = live[-12:]
        return self._state.rng.choices(recent, weights=[i + 1 for i in range(len(recent))])[0]

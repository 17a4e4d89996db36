"""Bundles: checked at the door, queued, and run at the next slot in order and all-or-nothing.

A bundle is 1 to 5 fully signed transactions with valid blockhashes that together tip at least
1,000 lamports. At the next slot tick (the engine is a chain listener) each queued bundle is first
rehearsed: its transactions are simulated in turn, each on the accounts the previous ones left
(written into LiteSVM), then every account is put back. If one fails the bundle is `Failed` and the
chain is as before (no fee, no signature); if all succeed they are executed for real, one after the
other, so they land in that one slot's block with history and notifications, and it is `Landed`.

Simplified from Jito: no auction (first come, first served), no uncle bandits, one region.

What a follower sees of it (devnode/replication/): the tip accounts are written as genesis accounts
(`Chain.set_genesis_account`), so they are kept like any touched account and are in the state a follower
loads; a landed bundle's transactions are recorded like any other, so they reach followers through the
replication log. The rehearsal's writes are not replicated, on purpose: they are put back before the
rehearsal returns, inside the same synchronous tick, so nothing (no read, no other event) can observe them,
and an account the rehearsal created is restored as "no account", which reads back as absent as before.
"""

from __future__ import annotations

import hashlib
import logging
import time
from collections import OrderedDict, deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from solders.account import Account
from solders.pubkey import Pubkey
from solders.transaction import VersionedTransaction

from devnode.block_engine.tips import MIN_TIP_LAMPORTS, TIP_ACCOUNTS, TIP_PAYMENT_PROGRAM, TipFloor, tip_of
from devnode.chain import Chain
from devnode.chain.ledger import NO_ACCOUNT
from devnode.records import TxRecord
from devnode.tpu import PACKET_DATA_SIZE

log = logging.getLogger(__name__)

PENDING, LANDED, FAILED, INVALID = "Pending", "Landed", "Failed", "Invalid"
MAX_BUNDLE_TXS = 5
MAX_PENDING = 1_000  # queued bundles; more are refused until the queue drains
MAX_PER_SLOT = 32  # bundles run at one tick; the rest wait for the next
KEEP_S = 300.0  # Jito's in-flight lookback is five minutes
MAX_KEPT = 10_000


class BundleRejected(ValueError):
    """Why a bundle is refused when it arrives (the caller's mistake: JSON-RPC -32602)."""


class QueueFull(RuntimeError):
    """Too many bundles wait for a slot."""


@dataclass
class Bundle:
    bundle_id: str
    transactions: list[VersionedTransaction]
    tip: int  # lamports
    received: float  # the engine's clock
    status: str = PENDING
    slot: int | None = None  # where it landed
    err: Any = None  # why it failed: the failing transaction's error
    failed_index: int | None = None


def bundle_id(txs: Sequence[VersionedTransaction]) -> str:
    """Jito's id: SHA-256 (hex) of the transactions' first signatures, base-58, joined by commas."""
    return hashlib.sha256(",".join(str(tx.signatures[0]) for tx in txs).encode()).hexdigest()


class BlockEngine:
    """The queue, the recent bundles by id and the tip floor; `on_slot` runs what is queued."""

    def __init__(self, chain: Chain, clock: Callable[[], float] = time.monotonic) -> None:
        self.chain = chain
        self.tips = TipFloor()
        self._clock = clock
        self._bundles: OrderedDict[str, Bundle] = OrderedDict()
        self._queue: deque[Bundle] = deque()
        rent = chain.svm.minimum_balance_for_rent_exemption(0)
        for account in TIP_ACCOUNTS:  # as on mainnet, where they exist: a small first tip pays no rent
            if chain.get_account(account) is None:
                chain.set_genesis_account(account, Account(rent, b"", TIP_PAYMENT_PROGRAM))

    def get(self, bundle_id: str) -> Bundle | None:
        return self._bundles.get(bundle_id)

    def submit(self, txs: Sequence[VersionedTransaction]) -> Bundle:
        """Check and queue; the same bundle again, unless it failed, is the one already known."""
        tip = self.check(txs)
        bid = bundle_id(txs)
        known = self._bundles.get(bid)
        if known is not None and known.status != FAILED:
            return known
        if len(self._queue) >= MAX_PENDING:
            raise QueueFull(f"{MAX_PENDING} bundles wait for a slot; retry in a few slots")
        bundle = Bundle(bid, list(txs), tip, self._clock())
        self._bundles.pop(bid, None)
        self._bundles[bid] = bundle
        self._queue.append(bundle)
        self._evict()
        return bundle

    def check(self, txs: Sequence[VersionedTransaction]) -> int:
        """The bundle's tip in lamports, or `BundleRejected` saying what is wrong."""
        if not 1 <= len(txs) <= MAX_BUNDLE_TXS:
            raise BundleRejected(f"a bundle holds 1 to {MAX_BUNDLE_TXS} transactions, not {len(txs)}")
        if len({tx.signatures[0] for tx in txs}) != len(txs):
            raise BundleRejected("the bundle holds the same transaction twice")
        for n, tx in enumerate(txs):
            size = len(bytes(tx))
            if size > PACKET_DATA_SIZE:
                raise BundleRejected(f"transaction {n} is {size} bytes, more than {PACKET_DATA_SIZE}")
            if len(tx.signatures) != tx.message.header.num_required_signatures or not all(tx.verify_with_results()):
                raise BundleRejected(f"transaction {n} is not fully signed: signature verification failed")
            if not (tx.uses_durable_nonce() or self.chain.is_blockhash_valid(tx.message.recent_blockhash)):
                raise BundleRejected(f"transaction {n} has an expired or unknown blockhash")
        tip = sum(tip_of(tx) for tx in txs)
        if tip < MIN_TIP_LAMPORTS:
            raise BundleRejected(f"bundle must tip one of the tip accounts at least {MIN_TIP_LAMPORTS} lamports")
        return tip

    # ------------------------------------------------------------ the chain's listener

    def on_transaction(self, rec: TxRecord, changed: list[tuple[Pubkey, Account | None]]) -> None:
        pass

    def on_slot(self, slot: int, parent: int, root: int) -> None:
        """A slot opened: run what is queued into it (called inside the chain's tick: never raises)."""
        for _ in range(min(MAX_PER_SLOT, len(self._queue))):
            bundle = self._queue.popleft()
            try:
                self._run(bundle)
            except Exception as exc:
                log.exception("block engine: bundle %s failed to run", bundle.bundle_id)
                bundle.status, bundle.err = FAILED, f"internal error: {exc}"
        self._evict()

    def _run(self, bundle: Bundle) -> None:
        results = self.rehearse(bundle.transactions)
        err = results[-1][0]["err"]
        if err is not None:
            bundle.status, bundle.failed_index, bundle.err = FAILED, len(results) - 1, err
            log.debug("block engine: bundle %s failed at transaction %d: %s", bundle.bundle_id, len(results) - 1, err)
            return
        for tx in bundle.transactions:
            rec = self.chain.execute(tx)
            if rec is None or rec.err is not None:  # the rehearsal ran the same state: not expected
                log.error(
                    "block engine: bundle %s: %s did not replay its rehearsal", bundle.bundle_id, tx.signatures[0]
                )
        bundle.status, bundle.slot = LANDED, self.chain.slot
        self.tips.add(bundle.tip)

    def rehearse(
        self, txs: Sequence[VersionedTransaction], *, sig_verify: bool = False, replace_blockhash: bool = False
    ) -> list[tuple[dict[str, Any], list[tuple[Pubkey, Account]]]]:
        """Simulate in order, each on the state the previous ones left, up to the first failure; then
        put every account back. One (simulation value, post accounts) per transaction run."""
        svm = self.chain.svm
        originals: dict[Pubkey, Account | None] = {}
        results: list[tuple[dict[str, Any], list[tuple[Pubkey, Account]]]] = []
        try:
            for tx in txs:
                if tx.signatures[0] in self.chain.txs:
                    results.append((self.chain.sim_value("AlreadyProcessed"), []))
                    break
                # BlockhashNotFound once the blockhash expired (unless replaced)
                value, post = self.chain.simulate(tx, sig_verify=sig_verify, replace_recent_blockhash=replace_blockhash)
                results.append((value, post))
                if value["err"] is not None:
                    break
                for key, account in post:
                    if key not in originals:
                        originals[key] = svm.get_account(key)
                    svm.set_account(key, account)
            return results
        finally:
            for key, original in originals.items():
                svm.set_account(key, original if original is not None else NO_ACCOUNT)

    def _evict(self) -> None:
        """Forget settled bundles past the lookback or beyond the count bound (oldest first)."""
        horizon = self._clock() - KEEP_S
        while self._bundles:
            oldest = next(iter(self._bundles.values()))
            if oldest.status == PENDING or (oldest.received >= horizon and len(self._bundles) <= MAX_KEPT):
                break
            self._bundles.popitem(last=False)

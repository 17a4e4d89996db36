"""The ledger: what LiteSVM does not keep. Blocks and the slot clock, blockhash ages, transaction
history and its retention, the address, token-owner, mint-decimals and priority-fee indexes, and the
reads over them. `devnode.chain.transactions.Chain` adds the transaction paths on top.

A follower (devnode/replication/) keeps a ledger of its own the same way: it loads a leader's state
(`load_replica`) and then applies what the leader recorded (`apply_transaction`, `apply_slot`,
`set_genesis_account`) through the same bookkeeping as the leader's own paths (`_land`, `_add_block`,
`_advance`), so its history, indexes, listeners and Clock sysvar follow the leader's."""

from __future__ import annotations

import hashlib
import os
import time
from collections import deque
from collections.abc import Callable, Sequence
from typing import Any, Protocol

from solders.account import Account
from solders.clock import Clock
from solders.epoch_schedule import EpochSchedule
from solders.hash import Hash
from solders.litesvm import LiteSVM
from solders.message import Message, MessageV0, MessageV1
from solders.pubkey import Pubkey
from solders.signature import Signature

from devnode.chain.constants import (
    COMMITMENT_NAMES,
    FAUCET,
    FAUCET_LAMPORTS,
    FINALIZED,
    IDENTITY,
    LAMPORTS_PER_SIGNATURE,
    MAX_PROCESSING_AGE,
    USDC_DECIMALS,
    USDC_MINT,
)
from devnode.parsing import compute_budget_price_and_limit
from devnode.records import Block, ChainSnapshot, TxRecord
from devnode.tokens import NATIVE_MINT, TOKEN_PROGRAM_ID, decode_mint, decode_token_account, encode_mint

#: What LiteSVM stores for "no account": a key set to it reads back as None.
NO_ACCOUNT = Account(0, b"", Pubkey.default())
#: Called with each account written outside any transaction (`Ledger.set_genesis_account`).
GenesisWriteWatcher = Callable[[Pubkey, Account], None]


class ChainListener(Protocol):
    """Called synchronously by the chain; implementations must not block (PubSub queues messages)."""

    def on_transaction(self, rec: TxRecord, changed: list[tuple[Pubkey, Account | None]]) -> None: ...

    def on_slot(self, slot: int, parent: int, root: int) -> None: ...


class Ledger:
    """LiteSVM plus a slot clock, blocks, history and indexes (`Chain` records transactions into them).

    LiteSVM's own blockhash check only accepts its latest hash, so it is off and this class keeps
    mainnet's rule instead (a hash is valid for 150 blocks). A block's published hash is LiteSVM's
    latest blockhash (expired every slot) salted per run.
    """

    def __init__(
        self,
        *,
        retention_slots: int,
        usdc_mint_authority: Pubkey,
        saved_state: dict[str, Any] | None = None,
        saved_accounts: Sequence[tuple[Pubkey, Account]] = (),
        now: float | None = None,
    ) -> None:
        self.retention_slots = max(1, retention_slots)
        self.svm = self._new_svm()
        self.epoch_schedule = EpochSchedule.without_warmup()
        self._listeners: list[ChainListener] = []
        self._genesis_watchers: list[GenesisWriteWatcher] = []
        self.txs: dict[Signature, TxRecord] = {}
        self.blocks: dict[int, Block] = {}
        self._open_sigs: list[Signature] = []
        self._hash_valid: dict[Hash, int] = {}
        self._by_address: dict[Pubkey, deque[tuple[int, Signature]]] = {}
        self._token_owner: dict[Pubkey, Pubkey] = {}  # token account -> owner
        self._tokens_by_owner: dict[Pubkey, set[Pubkey]] = {}
        self._prio: dict[int, list[tuple[int, list[Pubkey]]]] = {}
        self._mint_decimals: dict[Pubkey, int] = {}
        self.touched: set[Pubkey] = {USDC_MINT, NATIVE_MINT}
        self.transaction_count = 0
        self.start_time = time.time() if now is None else now
        # LiteSVM's hash chain restarts from the same seed on every start; salting the published
        # blockhashes keeps them (and so signatures of identical transactions) unique across restarts.
        self._salt = os.urandom(16)
        state = saved_state or {}
        self.slot: int = int(state.get("slot", -1)) + 1
        self.block_height: int = int(state.get("block_height", -1)) + 1
        self.transaction_count = int(state.get("transaction_count", 0))

        rent = self.svm.minimum_balance_for_rent_exemption(82)
        self.svm.set_account(
            USDC_MINT,
            Account(rent, encode_mint(usdc_mint_authority, 0, USDC_DECIMALS, None), TOKEN_PROGRAM_ID),
        )
        self.svm.set_account(NATIVE_MINT, Account(rent, encode_mint(None, 0, 9, None), TOKEN_PROGRAM_ID))
        for pubkey, account in saved_accounts:
            self.svm.set_account(pubkey, account)
            self.touched.add(pubkey)
            self._index_token_account(pubkey, account)
        self.svm.set_account(FAUCET.pubkey(), Account(FAUCET_LAMPORTS, b"", Pubkey.default()))
        self.svm.set_account(IDENTITY.pubkey(), Account(10**12, b"", Pubkey.default()))

        self._open_time = int(self.start_time)
        self._set_clock()
        # The first block closes at once so that a blockhash exists before the first tick.
        genesis = self._close_block()
        saved_genesis = state.get("genesis_hash")
        self.genesis_hash: Hash = Hash.from_string(saved_genesis) if saved_genesis else genesis.blockhash
        self._open(self.slot + 1, self.block_height + 1, self.start_time)

    @staticmethod
    def _new_svm() -> LiteSVM:
        svm = LiteSVM().with_blockhash_check(False).with_transaction_history(0)
        svm.set_epoch_schedule(EpochSchedule.without_warmup())
        return svm

    # ------------------------------------------------------------------ listeners / state

    def add_listener(self, listener: ChainListener, *, first: bool = False) -> None:
        """`first`: called before the listeners already there (the replication log must see a slot open
        before a listener that lands transactions in it, the block engine, runs)."""
        if first:
            self._listeners.insert(0, listener)
        else:
            self._listeners.append(listener)

    def remove_listener(self, listener: ChainListener) -> None:
        if listener in self._listeners:
            self._listeners.remove(listener)

    def export_state(self) -> tuple[dict[str, Any], list[tuple[Pubkey, Account]]]:
        """What a restart needs: the slot position and the accounts transactions have touched."""
        state = {
            "slot": self.slot,
            "block_height": self.block_height,
            "genesis_hash": str(self.genesis_hash),
            "transaction_count": self.transaction_count,
        }
        accounts = [(k, a) for k in sorted(self.touched, key=bytes) if (a := self.svm.get_account(k)) is not None]
        return state, accounts

    def watch_genesis_writes(self, watcher: GenesisWriteWatcher) -> None:
        """Be told of every account written outside a transaction (the replication log is)."""
        self._genesis_watchers.append(watcher)

    def unwatch_genesis_writes(self, watcher: GenesisWriteWatcher) -> None:
        if watcher in self._genesis_watchers:
            self._genesis_watchers.remove(watcher)

    def account_keys(self) -> set[Pubkey]:
        """Every account the chain wrote: the touched ones, the faucet and the identity (the rest of LiteSVM's
        accounts are its own programs and sysvars, the same on every node)."""
        return self.touched | {FAUCET.pubkey(), IDENTITY.pubkey()}

    def snapshot(self) -> ChainSnapshot:
        """The whole state now (what a follower's `load_replica` takes); the records are shared, not copied."""
        last = self.last_block
        return ChainSnapshot(
            genesis_hash=self.genesis_hash,
            start_time=self.start_time,
            slot=self.slot,
            block_height=self.block_height,
            open_time=self._open_time,
            transaction_count=self.transaction_count,
            block=last,
            block_records=[self.txs[s] for s in last.signatures if s in self.txs],
            open_records=[self.txs[s] for s in self._open_sigs if s in self.txs],
            hash_valid=dict(self._hash_valid),
            accounts={k: self.svm.get_account(k) for k in sorted(self.account_keys(), key=bytes)},
        )

    def load_replica(self, snap: ChainSnapshot) -> None:
        """Become the chain `snap` describes, in place (listeners stay): a follower's first sync and its resyncs.

        Everything is replaced: LiteSVM (a fresh one, so that no account of before survives), history,
        blocks, indexes and the slot position; listeners are not called."""
        self.svm = self._new_svm()
        self.txs = {}
        self.blocks = {}
        self._open_sigs = []
        self._by_address = {}
        self._token_owner = {}
        self._tokens_by_owner = {}
        self._prio = {}
        self._mint_decimals = {}
        self.touched = set()
        self.genesis_hash = snap.genesis_hash
        self.start_time = snap.start_time
        for key, account in snap.accounts.items():
            if account is not None:
                self.svm.set_account(key, account)
                self.touched.add(key)
                self._index_token_account(key, account)
        self.blocks[snap.block.slot] = snap.block
        self._hash_valid = dict(snap.hash_valid)
        for rec in snap.block_records:
            self._index_history(rec)
        for rec in snap.open_records:
            self._index_history(rec)
            self._open_sigs.append(rec.signature)
        self.transaction_count = snap.transaction_count
        self.slot = snap.slot
        self.block_height = snap.block_height
        self._open_time = snap.open_time
        self._set_clock()

    # ------------------------------------------------------------------ what a follower applies

    def apply_transaction(self, rec: TxRecord, changed: Sequence[tuple[Pubkey, Account | None]]) -> None:
        """A transaction the leader recorded in the open slot: its account writes, then `_land` as the leader's
        `_record` does (history, block, indexes, transaction count, listeners)."""
        if rec.slot != self.slot:
            raise ValueError(f"transaction {rec.signature} of slot {rec.slot} applied in slot {self.slot}")
        for key, account in changed:
            self.svm.set_account(key, account if account is not None else NO_ACCOUNT)
        self._land(rec, list(changed))

    def apply_slot(self, block: Block, next_slot: int, open_time: int) -> None:
        """The leader closed the open slot with `block` (its blockhash, not one of ours) and opened `next_slot`:
        the same as `tick` from there on (validity of the hash, retention, the Clock sysvar, listeners)."""
        if block.slot != self.slot:
            raise ValueError(f"block of slot {block.slot} applied in slot {self.slot}")
        self._add_block(block)
        self._advance(block, next_slot, block.block_height + 1, open_time)

    def _land(self, rec: TxRecord, changed: list[tuple[Pubkey, Account | None]]) -> None:
        """A landed transaction's bookkeeping, on the leader (`Chain._record`) and on a follower: its place in the
        open block and the history, the transaction count, the token-owner and mint indexes of the accounts it
        changed, then the listeners."""
        self._index_history(rec)
        self._open_sigs.append(rec.signature)
        self.transaction_count += 1
        for key, account in changed:
            self.touched.add(key)
            self._index_token_account(key, account)
            self._mint_decimals.pop(key, None)
        for listener in list(self._listeners):
            listener.on_transaction(rec, changed)

    def _index_history(self, rec: TxRecord) -> None:
        self.txs[rec.signature] = rec
        for key in dict.fromkeys(rec.account_keys):
            self._by_address.setdefault(key, deque()).append((rec.slot, rec.signature))
        self._prio.setdefault(rec.slot, []).append((rec.priority_fee, rec.writable_keys))

    # ------------------------------------------------------------------ slot clock

    @property
    def last_block(self) -> Block:
        return next(reversed(self.blocks.values()))

    @property
    def first_available_block(self) -> int:
        return next(iter(self.blocks)) if self.blocks else self.slot

    @property
    def root(self) -> int:
        return max(self.slot - FINALIZED, self.first_available_block)

    @property
    def epoch(self) -> int:
        return int(self.epoch_schedule.get_epoch(self.slot))

    def _set_clock(self) -> None:
        epoch = self.epoch_schedule.get_epoch(self.slot)
        self.svm.set_clock(Clock(self.slot, int(self.start_time), epoch, epoch + 1, self._open_time))

    def _close_block(self) -> Block:
        previous = self.last_block.blockhash if self.blocks else Hash.default()
        parent = self.last_block.slot if self.blocks else max(self.slot - 1, 0)
        block = Block(
            slot=self.slot,
            parent_slot=parent,
            block_height=self.block_height,
            blockhash=Hash(hashlib.sha256(bytes(self.svm.latest_blockhash()) + self._salt).digest()),
            previous_blockhash=previous,
            block_time=self._open_time,
            signatures=self._open_sigs,
        )
        self._add_block(block)
        self.svm.expire_blockhash()
        return block

    def _add_block(self, block: Block) -> None:
        self.blocks[block.slot] = block
        self._hash_valid[block.blockhash] = block.block_height + MAX_PROCESSING_AGE
        self._open_sigs = []

    def _open(self, slot: int, block_height: int, now: float) -> None:
        self.slot = slot
        self.block_height = block_height
        self._open_time = int(now)
        self._set_clock()

    def _advance(self, closed: Block, slot: int, block_height: int, now: float) -> None:
        """After `closed` joined the blocks: open the next slot, purge what retention drops, tell the listeners."""
        self._open(slot, block_height, now)
        self._purge()
        for listener in list(self._listeners):
            listener.on_slot(self.slot, closed.slot, self.root)

    @property
    def open_time(self) -> int:
        """The open slot's block time (the Clock sysvar's unix timestamp)."""
        return self._open_time

    def tick(self, now: float | None = None) -> Block:
        """Close the open slot's block and open the next slot."""
        closed = self._close_block()
        self._advance(closed, self.slot + 1, self.block_height + 1, time.time() if now is None else now)
        return closed

    def _purge(self) -> None:
        first_keep = self.slot - self.retention_slots
        while self.blocks and next(iter(self.blocks)) < first_keep and len(self.blocks) > 1:
            slot = next(iter(self.blocks))
            block = self.blocks.pop(slot)
            self._prio.pop(slot, None)
            for sig in block.signatures:
                rec = self.txs.pop(sig, None)
                if rec is None:
                    continue
                for key in rec.account_keys:
                    dq = self._by_address.get(key)
                    while dq and dq[0][0] < first_keep:
                        dq.popleft()
                    if dq is not None and not dq:
                        del self._by_address[key]
        expired = [h for h, last in self._hash_valid.items() if last < self.block_height]
        for h in expired:
            del self._hash_valid[h]

    # ------------------------------------------------------------------ queries

    def latest_blockhash(self) -> Hash:
        """The hash of the newest closed block: what clients sign against."""
        return self.last_block.blockhash

    def last_valid_block_height(self) -> int:
        return self.last_block.block_height + MAX_PROCESSING_AGE

    def is_blockhash_valid(self, blockhash: Hash) -> bool:
        last = self._hash_valid.get(blockhash)
        return last is not None and self.block_height <= last

    def get_account(self, pubkey: Pubkey) -> Account | None:
        return self.svm.get_account(pubkey)

    def set_genesis_account(self, pubkey: Pubkey, account: Account) -> None:
        """Write an account outside any transaction, as genesis does (kept across restarts like a touched one;
        the watchers, the replication log, are told)."""
        self.svm.set_account(pubkey, account)
        self.touched.add(pubkey)
        self._index_token_account(pubkey, account)
        self._mint_decimals.pop(pubkey, None)
        for watcher in list(self._genesis_watchers):
            watcher(pubkey, account)

    def commitment_of(self, rec: TxRecord) -> int:
        return min(self.slot - rec.slot, FINALIZED)

    def signature_status(self, sig: Signature) -> dict[str, Any] | None:
        rec = self.txs.get(sig)
        if rec is None:
            return None
        level = self.commitment_of(rec)
        return {
            "confirmationStatus": COMMITMENT_NAMES[level],
            "confirmations": None if level == FINALIZED else level,
            "err": rec.err,
            "slot": rec.slot,
            "status": {"Ok": None} if rec.err is None else {"Err": rec.err},
        }

    def signatures_for_address(
        self, address: Pubkey, before: Signature | None, until: Signature | None, limit: int
    ) -> list[TxRecord]:
        """Newest first, `before` and `until` exclusive, as mainnet."""
        dq = self._by_address.get(address)
        if not dq:
            return []
        out: list[TxRecord] = []
        started = before is None
        for _, sig in reversed(dq):
            if not started:
                started = sig == before
                continue
            if sig == until:
                break
            rec = self.txs.get(sig)
            if rec is not None:
                out.append(rec)
                if len(out) >= limit:
                    break
        return out

    def token_accounts_of(self, owner: Pubkey) -> list[tuple[Pubkey, Account]]:
        out = []
        for key in sorted(self._tokens_by_owner.get(owner, ()), key=bytes):
            account = self.svm.get_account(key)
            if account is not None:
                out.append((key, account))
        return out

    def mint_decimals(self, mint: Pubkey) -> int | None:
        if mint in self._mint_decimals:
            return self._mint_decimals[mint]
        state = decode_mint(self.svm.get_account(mint))
        if state is None:
            return None
        self._mint_decimals[mint] = state.decimals
        return state.decimals

    def recent_prioritization_fees(self, addresses: Sequence[Pubkey]) -> list[dict[str, int]]:
        """Mainnet's rule per slot: the block's minimum fee, raised to each address's minimum."""
        slots = list(self.blocks)[-MAX_PROCESSING_AGE:]
        out = []
        for slot in slots:
            entries = self._prio.get(slot, [])
            fee = min((p for p, _ in entries), default=0)
            for addr in addresses:
                account_fees = [p for p, w in entries if addr in w]
                if account_fees:
                    fee = max(fee, min(account_fees))
            out.append({"prioritizationFee": fee, "slot": slot})
        return out

    def fee_for_message(self, msg: Message | MessageV0 | MessageV1) -> int:
        price, limit = compute_budget_price_and_limit(
            [(msg.account_keys[ix.program_id_index], bytes(ix.data)) for ix in msg.instructions]
        )
        if limit is None:
            limit = min(200_000 * len(msg.instructions), 1_400_000)
        return LAMPORTS_PER_SIGNATURE * msg.header.num_required_signatures + (price * limit + 999_999) // 1_000_000

    # ------------------------------------------------------------------ token index

    def _index_token_account(self, pubkey: Pubkey, account: Account | None) -> None:
        state = decode_token_account(account)
        old = self._token_owner.get(pubkey)
        new = state.owner if state is not None else None
        if old == new:
            return
        if old is not None:
            owned = self._tokens_by_owner.get(old)
            if owned is not None:
                owned.discard(pubkey)
                if not owned:
                    del self._tokens_by_owner[old]
            del self._token_owner[pubkey]
        if new is not None:
            self._token_owner[pubkey] = new
            self._tokens_by_owner.setdefault(new, set()).add(pubkey)

"""The ledger: LiteSVM for execution plus what LiteSVM does not keep (blocks, history, blockhash
ages, indexes, retention). Pure of I/O: the node drives `tick()` from its clock and persists
`export_state()`; listeners (PubSub) are called synchronously from inside the chain.

Transaction history and blocks live in memory only; a restarted node keeps account state
(see devnode/persist.py) but starts a fresh history."""

from __future__ import annotations

import hashlib
import os
import time
from collections import deque
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import base58
from solders.account import Account
from solders.clock import Clock
from solders.compute_budget import set_compute_unit_limit
from solders.epoch_schedule import EpochSchedule
from solders.hash import Hash
from solders.keypair import Keypair
from solders.litesvm import LiteSVM
from solders.message import Message, MessageV0, MessageV1
from solders.pubkey import Pubkey
from solders.signature import Signature
from solders.system_program import TransferParams, transfer
from solders.transaction import VersionedTransaction
from solders.transaction_metadata import (
    FailedTransactionMetadata,
    SimulatedTransactionInfo,
    TransactionMetadata,
)

from devnode.encoding import error_display, error_json, return_data_json
from devnode.errors import TX_SIGNATURE_VERIFICATION_FAILURE, RpcError, preflight_failure
from devnode.injected import InjectedTransaction
from devnode.parsing import compute_budget_price_and_limit
from devnode.records import Block, TxRecord
from devnode.tokens import (
    NATIVE_MINT,
    TOKEN_PROGRAM_ID,
    decode_mint,
    decode_token_account,
    encode_mint,
    ui_token_amount,
)

USDC_MINT = Pubkey.from_string("EPjFWdd5AufqSSqeM2qN1xzybapC8G4wEGGkZwyTDt1v")
USDC_DECIMALS = 6
MAX_PROCESSING_AGE = 150  # blocks a blockhash stays valid, as on mainnet
LAMPORTS_PER_SIGNATURE = 5_000
FAUCET_LAMPORTS = 500_000_000 * 10**9
ADDRESS_LOOKUP_TABLE_META_SIZE = 56
# Commitment levels as this node reports them: processed in the landing slot, confirmed one slot
# later, finalized two slots later (a single validator needs no votes; it keeps tests fast).
PROCESSED, CONFIRMED, FINALIZED = 0, 1, 2
COMMITMENT_NAMES = ("processed", "confirmed", "finalized")


def _seeded_keypair(label: str) -> Keypair:
    return Keypair.from_seed(hashlib.sha256(f"devnode-{label}".encode()).digest())


IDENTITY = _seeded_keypair("identity")
VOTE_ACCOUNT = _seeded_keypair("vote").pubkey()
FAUCET = _seeded_keypair("faucet")


class ChainListener(Protocol):
    """Called synchronously by the chain; implementations must not block (PubSub queues messages)."""

    def on_transaction(self, rec: TxRecord, changed: list[tuple[Pubkey, Account | None]]) -> None: ...

    def on_slot(self, slot: int, parent: int, root: int) -> None: ...


@dataclass(frozen=True)
class _Keys:
    keys: list[Pubkey]
    writable: list[bool]
    signer: list[bool]
    loaded_writable: list[Pubkey]
    loaded_readonly: list[Pubkey]


class Chain:
    """LiteSVM plus a slot clock, blocks, history and indexes.

    LiteSVM's own blockhash check only accepts its latest hash, so it is off and this class keeps
    mainnet's rule instead (a hash is valid for 150 blocks). A block's published hash is LiteSVM's
    latest blockhash (expired every slot) salted per run. LiteSVM's transaction history is off too:
    duplicates are caught here, against the retained history.
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
        self.svm = LiteSVM().with_blockhash_check(False).with_transaction_history(0)
        self.svm.set_epoch_schedule(EpochSchedule.without_warmup())
        self.epoch_schedule = EpochSchedule.without_warmup()
        self._listeners: list[ChainListener] = []
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
        self._open_next(self.start_time)

    # ------------------------------------------------------------------ listeners / state

    def add_listener(self, listener: ChainListener) -> None:
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
        self.blocks[self.slot] = block
        self._hash_valid[block.blockhash] = block.block_height + MAX_PROCESSING_AGE
        self._open_sigs = []
        self.svm.expire_blockhash()
        return block

    def _open_next(self, now: float) -> None:
        self.slot += 1
        self.block_height += 1
        self._open_time = int(now)
        self._set_clock()

    def tick(self, now: float | None = None) -> Block:
        """Close the open slot's block and open the next slot."""
        closed = self._close_block()
        self._open_next(time.time() if now is None else now)
        self._purge()
        for listener in list(self._listeners):
            listener.on_slot(self.slot, closed.slot, self.root)
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

    # ------------------------------------------------------------------ transactions

    def _resolve_keys(self, tx: VersionedTransaction) -> _Keys:
        msg = tx.message
        static = list(msg.account_keys)
        h = msg.header
        nsig, n = h.num_required_signatures, len(static)
        writable = [
            (i < nsig - h.num_readonly_signed_accounts) if i < nsig else (i < n - h.num_readonly_unsigned_accounts)
            for i in range(n)
        ]
        signer = [i < nsig for i in range(n)]
        loaded_w: list[Pubkey] = []
        loaded_r: list[Pubkey] = []
        if isinstance(msg, MessageV0):
            for lookup in msg.address_table_lookups:
                table = self.svm.get_account(lookup.account_key)
                if table is None:
                    continue
                raw = bytes(table.data)[ADDRESS_LOOKUP_TABLE_META_SIZE:]
                addrs = [Pubkey.from_bytes(raw[i : i + 32]) for i in range(0, len(raw) - 31, 32)]
                loaded_w += [addrs[i] for i in bytes(lookup.writable_indexes) if i < len(addrs)]
                loaded_r += [addrs[i] for i in bytes(lookup.readonly_indexes) if i < len(addrs)]
        keys = static + loaded_w + loaded_r
        writable += [True] * len(loaded_w) + [False] * len(loaded_r)
        signer += [False] * (len(loaded_w) + len(loaded_r))
        return _Keys(keys, writable, signer, loaded_w, loaded_r)

    def _snapshot(self, keys: Iterable[Pubkey]) -> list[Account | None]:
        return [self.svm.get_account(k) for k in keys]

    def _token_balances(self, accounts: Sequence[Account | None]) -> list[dict[str, Any]]:
        out = []
        for i, account in enumerate(accounts):
            state = decode_token_account(account)
            if state is None or account is None:
                continue
            decimals = self.mint_decimals(state.mint)
            if decimals is None:
                continue
            out.append(
                {
                    "accountIndex": i,
                    "mint": str(state.mint),
                    "owner": str(state.owner),
                    "programId": str(account.owner),
                    "uiTokenAmount": ui_token_amount(state.amount, decimals),
                }
            )
        return out

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

    def _record(
        self,
        tx: VersionedTransaction,
        keys: _Keys,
        pre: Sequence[Account | None],
        *,
        err: Any,
        fee: int,
        logs: list[str],
        inner: list[dict[str, Any]],
        compute_units: int,
        return_data: dict[str, Any] | None,
        extra_changed: Sequence[Pubkey] = (),
        pre_token_balances: list[dict[str, Any]] | None = None,
        post_token_balances: list[dict[str, Any]] | None = None,
        injected: bool = False,
    ) -> TxRecord:
        post = self._snapshot(keys.keys)
        msg = tx.message
        price, _ = compute_budget_price_and_limit(
            [(keys.keys[ix.program_id_index], bytes(ix.data)) for ix in msg.instructions]
        )
        if pre_token_balances is None or post_token_balances is None:
            pre_token_balances = self._token_balances(pre)
            post_token_balances = self._token_balances(post)
        rec = TxRecord(
            signature=tx.signatures[0],
            slot=self.slot,
            block_time=self._open_time,
            index=len(self._open_sigs),
            transaction=tx,
            account_keys=keys.keys,
            writable=keys.writable,
            signer=keys.signer,
            loaded_writable=keys.loaded_writable,
            loaded_readonly=keys.loaded_readonly,
            err=err,
            fee=fee,
            pre_balances=[a.lamports if a is not None else 0 for a in pre],
            post_balances=[a.lamports if a is not None else 0 for a in post],
            pre_token_balances=pre_token_balances,
            post_token_balances=post_token_balances,
            log_messages=logs,
            inner_instructions=inner,
            compute_units=compute_units,
            return_data=return_data,
            priority_fee=price,
            injected=injected,
        )
        self.txs[rec.signature] = rec
        self._open_sigs.append(rec.signature)
        self.transaction_count += 1
        for key in dict.fromkeys(keys.keys):
            self._by_address.setdefault(key, deque()).append((self.slot, rec.signature))
        writable = rec.writable_keys
        self._prio.setdefault(self.slot, []).append((price, writable))
        changed_keys = list(dict.fromkeys([*writable, *extra_changed]))
        by_key = dict(zip(keys.keys, post, strict=True))
        changed: list[tuple[Pubkey, Account | None]] = []
        for key in changed_keys:
            account = by_key[key] if key in by_key else self.svm.get_account(key)
            changed.append((key, account))
            self.touched.add(key)
            self._index_token_account(key, account)
            if key in self._mint_decimals:
                del self._mint_decimals[key]
        for listener in list(self._listeners):
            listener.on_transaction(rec, changed)
        return rec

    @staticmethod
    def _inner_json(meta: TransactionMetadata) -> list[dict[str, Any]]:
        out = []
        for index, group in enumerate(meta.inner_instructions()):
            if not group:
                continue
            out.append(
                {
                    "index": index,
                    "instructions": [
                        {
                            "accounts": list(bytes(ii.instruction().accounts)),
                            "data": base58.b58encode(bytes(ii.instruction().data)).decode(),
                            "programIdIndex": ii.instruction().program_id_index,
                            "stackHeight": ii.stack_height(),
                        }
                        for ii in group
                    ],
                }
            )
        return out

    @staticmethod
    def _return_data(meta: TransactionMetadata) -> dict[str, Any] | None:
        rd = meta.return_data()
        return return_data_json(rd.program_id, bytes(rd.data))

    def _check_signatures(self, tx: VersionedTransaction) -> None:
        if not all(tx.verify_with_results()):
            raise RpcError(TX_SIGNATURE_VERIFICATION_FAILURE, "Transaction signature verification failure")

    def _blockhash_ok(self, tx: VersionedTransaction) -> bool:
        return tx.uses_durable_nonce() or self.is_blockhash_valid(tx.message.recent_blockhash)

    @staticmethod
    def sim_value(
        err: Any,
        logs: list[str] | None = None,
        units: int = 0,
        return_data: dict[str, Any] | None = None,
        inner: list[dict[str, Any]] | None = None,
        accounts: list[Any] | None = None,
        replacement: dict[str, Any] | None = None,
    ) -> dict[str, Any]:
        return {
            "accounts": accounts,
            "err": err,
            "innerInstructions": inner,
            "logs": [] if logs is None else logs,
            "replacementBlockhash": replacement,
            "returnData": return_data,
            "unitsConsumed": units,
        }

    def simulate(
        self,
        tx: VersionedTransaction,
        *,
        sig_verify: bool = False,
        replace_recent_blockhash: bool = False,
        inner_instructions: bool = False,
    ) -> tuple[dict[str, Any], list[tuple[Pubkey, Account]]]:
        """Run without committing. Returns the simulation value (without `accounts`) and post states."""
        if sig_verify:
            self._check_signatures(tx)
        replacement = None
        if replace_recent_blockhash:
            replacement = {
                "blockhash": str(self.latest_blockhash()),
                "lastValidBlockHeight": self.last_valid_block_height(),
            }
        elif not self._blockhash_ok(tx):
            return self.sim_value("BlockhashNotFound"), []
        if not sig_verify:
            self.svm.with_sigverify(False)
        try:
            res = self.svm.simulate_transaction(tx)
        finally:
            if not sig_verify:
                self.svm.with_sigverify(True)
        if isinstance(res, SimulatedTransactionInfo):
            meta, err, post = res.meta(), None, list(res.post_accounts())
        else:
            meta, err, post = res.meta(), error_json(res.err()), []
        value = self.sim_value(
            err,
            list(meta.logs()),
            meta.compute_units_consumed(),
            self._return_data(meta),
            self._inner_json(meta) if inner_instructions else None,
            replacement=replacement,
        )
        return value, post

    def send(self, tx: VersionedTransaction, *, skip_preflight: bool = False) -> Signature:
        """sendTransaction: check signatures and blockhash, optionally preflight, then execute.

        A transaction that fails at execution lands with its error and pays its fee, as on mainnet;
        one that cannot pay its fee is dropped (with skipPreflight) like a real leader drops it.
        """
        sig = tx.signatures[0]
        if sig in self.txs:
            if skip_preflight:
                return sig
            raise preflight_failure(error_display("AlreadyProcessed"), self.sim_value("AlreadyProcessed"))
        self._check_signatures(tx)
        if not self._blockhash_ok(tx):
            raise preflight_failure(error_display("BlockhashNotFound"), self.sim_value("BlockhashNotFound"))
        if not skip_preflight:
            value, _ = self.simulate(tx, sig_verify=False)
            if value["err"] is not None:
                raise preflight_failure(error_display(value["err"]), value)
        self.execute(tx)
        return sig

    def execute(self, tx: VersionedTransaction) -> TxRecord | None:
        """Execute in LiteSVM and record if it landed (success, or failure with the fee charged)."""
        keys = self._resolve_keys(tx)
        pre = self._snapshot(keys.keys)
        res = self.svm.send_transaction(tx)
        if isinstance(res, FailedTransactionMetadata):
            payer_before = pre[0].lamports if pre and pre[0] is not None else 0
            payer_after = self.svm.get_balance(keys.keys[0]) or 0
            if payer_after >= payer_before:
                return None  # never landed: nothing charged, nothing to record
            meta, err = res.meta(), error_json(res.err())
        else:
            meta, err = res, None
        return self._record(
            tx,
            keys,
            pre,
            err=err,
            fee=meta.fee(),
            logs=list(meta.logs()),
            inner=self._inner_json(meta),
            compute_units=meta.compute_units_consumed(),
            return_data=self._return_data(meta),
        )

    def airdrop(self, pubkey: Pubkey, lamports: int) -> Signature:
        """Real lamports: a transfer signed by the node's faucet, recorded like any transaction."""
        bump = 0
        while True:
            ixs = [transfer(TransferParams(from_pubkey=FAUCET.pubkey(), to_pubkey=pubkey, lamports=lamports))]
            if bump:  # same amount to the same address in the same slot: make the signature unique
                ixs.insert(0, set_compute_unit_limit(200_000 - bump))
            msg = Message.new_with_blockhash(ixs, FAUCET.pubkey(), self.latest_blockhash())
            tx = VersionedTransaction(msg, [FAUCET])
            if tx.signatures[0] not in self.txs:
                break
            bump += 1
        rec = self.execute(tx)
        if rec is None or rec.err is not None:
            raise ValueError(f"airdrop failed: {None if rec is None else rec.err}")
        return rec.signature

    def inject(self, itx: InjectedTransaction) -> Signature:
        """Record a transaction LiteSVM cannot run (see devnode/injected.py) exactly like an executed one."""
        tx = itx.transaction
        sig = tx.signatures[0]
        if sig in self.txs:
            raise ValueError(f"transaction {sig} already processed")
        if not all(tx.verify_with_results()):
            raise ValueError(f"transaction {sig} is not signed by all its signers")
        keys = self._resolve_keys(tx)
        payer = keys.keys[0]
        written = dict(itx.account_writes)
        payer_account = written.get(payer) or self.svm.get_account(payer)
        if payer_account is None or payer_account.lamports < itx.fee:
            raise ValueError(f"fee payer {payer} cannot pay the fee of {itx.fee} lamports")
        pre = self._snapshot(keys.keys)
        for pubkey, account in itx.account_writes:
            self.svm.set_account(pubkey, account)
        self.svm.set_account(
            payer,
            Account(
                payer_account.lamports - itx.fee,
                bytes(payer_account.data),
                payer_account.owner,
                payer_account.executable,
                payer_account.rent_epoch,
            ),
        )
        explicit = bool(itx.pre_token_balances or itx.post_token_balances)
        rec = self._record(
            tx,
            keys,
            pre,
            err=None,
            fee=itx.fee,
            logs=list(itx.log_messages),
            inner=list(itx.inner_instructions),
            compute_units=itx.compute_units_consumed,
            return_data=None,
            extra_changed=[payer, *written],
            pre_token_balances=list(itx.pre_token_balances) if explicit else None,
            post_token_balances=list(itx.post_token_balances) if explicit else None,
            injected=True,
        )
        return rec.signature


__all__ = [
    "COMMITMENT_NAMES",
    "CONFIRMED",
    "FAUCET",
    "FINALIZED",
    "IDENTITY",
    "PROCESSED",
    "USDC_MINT",
    "VOTE_ACCOUNT",
    "Chain",
    "ChainListener",
]

"""Transactions on the chain: simulate, send (with mainnet's preflight rules), execute in LiteSVM,
airdrop from the faucet, and inject what LiteSVM cannot run; each one that lands is recorded into the
ledger and announced to the listeners. A transaction with a pump.fun instruction is executed by the
devnode's own emulation (devnode/pump_exec/) instead of LiteSVM, on the same paths."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import base58
from solders.account import Account
from solders.compute_budget import set_compute_unit_limit
from solders.message import Message, MessageV0
from solders.pubkey import Pubkey
from solders.signature import Signature
from solders.system_program import TransferParams, transfer
from solders.transaction import VersionedTransaction
from solders.transaction_metadata import FailedTransactionMetadata, SimulatedTransactionInfo, TransactionMetadata

from devnode.chain.constants import FAUCET
from devnode.chain.ledger import Ledger
from devnode.encoding import error_display, error_json, return_data_json
from devnode.errors import TX_SIGNATURE_VERIFICATION_FAILURE, RpcError, preflight_failure
from devnode.injected import InjectedTransaction
from devnode.parsing import compute_budget_price_and_limit
from devnode.pump_exec import Emulation, TxView, emulate, involves_pump
from devnode.records import TxRecord
from devnode.tokens import decode_token_account, ui_token_amount

ADDRESS_LOOKUP_TABLE_META_SIZE = 56


@dataclass(frozen=True)
class _Keys:
    keys: list[Pubkey]
    writable: list[bool]
    signer: list[bool]
    loaded_writable: list[Pubkey]
    loaded_readonly: list[Pubkey]


class Chain(Ledger):
    """LiteSVM plus a slot clock, blocks, history and indexes (the `Ledger`), and the transaction paths.

    LiteSVM's transaction history is off: duplicates are caught here, against the retained history.
    """

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
        by_key = dict(zip(keys.keys, post, strict=True))
        changed = [
            (key, by_key[key] if key in by_key else self.svm.get_account(key))
            for key in dict.fromkeys([*rec.writable_keys, *extra_changed])
        ]
        self._land(rec, changed)
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
    def _pump_view(tx: VersionedTransaction, keys: _Keys) -> TxView | None:
        """The transaction as the pump emulation reads it, or None when it has no pump instruction."""
        ixs = [(ix.program_id_index, bytes(ix.accounts), bytes(ix.data)) for ix in tx.message.instructions]
        view = TxView(keys.keys, keys.writable, keys.signer, ixs)
        return view if involves_pump(view) else None

    def _emulate(self, tx: VersionedTransaction, view: TxView) -> Emulation:
        return emulate(view, self.svm.get_account, fee=self.fee_for_message(tx.message), now=self._open_time)

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
        view = self._pump_view(tx, self._resolve_keys(tx))
        if view is not None:
            em = self._emulate(tx, view)
            inner = em.inner_instructions if inner_instructions else None
            value = self.sim_value(em.err, em.logs, em.units, None, inner, replacement=replacement)
            return value, em.post_accounts() if em.err is None else []
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
        """Execute in LiteSVM (a pump transaction: emulate it) and record if it landed (success, or failure with
        the fee charged)."""
        keys = self._resolve_keys(tx)
        view = self._pump_view(tx, keys)
        if view is not None:
            em = self._emulate(tx, view)
            return self.txs[self.inject(em.injected(tx))] if em.landed else None
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
            err=itx.err,
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

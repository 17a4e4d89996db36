"""Transaction methods: blockhashes and fees, sending and simulating (with mainnet's wire decoding and
size limits), and reading transactions, statuses and an address's signature history."""

from __future__ import annotations

import base64
import binascii
from typing import Any

import base58
from solders.hash import Hash, ParseHashError
from solders.message import from_bytes_versioned
from solders.transaction import VersionedTransaction

from devnode.chain.constants import COMMITMENT_NAMES
from devnode.encoding import check_account_encoding, encode_account, render_tx_with_meta
from devnode.errors import RpcError, invalid_params
from devnode.parsing import MEMO_PROGRAM_IDS
from devnode.records import TxRecord
from devnode.rpc.base import MethodGroup
from devnode.rpc.params import arg, as_pubkey, as_signature, as_uint, config, max_version_of, required, tx_config

MAX_BASE58_TX = 1683
MAX_BASE64_TX = 1644


def decode_transaction(data: Any, encoding: str) -> VersionedTransaction:
    """sendTransaction / simulateTransaction wire decoding with mainnet's size limits and messages."""
    if not isinstance(data, str):
        raise invalid_params("Invalid params: expected an encoded transaction string")
    try:
        if encoding == "base58":
            if len(data) > MAX_BASE58_TX:
                raise invalid_params(
                    f"base58 encoded solana_transaction::versioned::VersionedTransaction too large: {len(data)} bytes "
                    f"(max: encoded/raw {MAX_BASE58_TX}/1232)"
                )
            raw = base58.b58decode(data)
        elif encoding == "base64":
            if len(data) > MAX_BASE64_TX:
                raise invalid_params(
                    f"base64 encoded solana_transaction::versioned::VersionedTransaction too large: {len(data)} bytes "
                    f"(max: encoded/raw {MAX_BASE64_TX}/1232)"
                )
            raw = base64.b64decode(data, validate=True)
        else:
            raise invalid_params(
                f"Invalid params: unsupported encoding: {encoding}. Supported encodings: base58, base64"
            )
    except (ValueError, binascii.Error) as exc:
        if isinstance(exc, RpcError):
            raise
        raise invalid_params(f"invalid {encoding} encoding: {exc}") from exc
    try:
        tx = VersionedTransaction.from_bytes(raw)
        tx.sanitize()
    except Exception as exc:
        raise invalid_params(
            f"failed to deserialize solana_transaction::versioned::VersionedTransaction: {exc}"
        ) from exc
    return tx


def _memo(rec: TxRecord) -> str | None:
    memos = []
    for ix in rec.transaction.message.instructions:
        if rec.account_keys[ix.program_id_index] in MEMO_PROGRAM_IDS:
            data = bytes(ix.data)
            memos.append(f"[{len(data)}] {data.decode('utf-8', 'replace')}")
    return "; ".join(memos) if memos else None


class TransactionMethods(MethodGroup):
    """Handlers for blockhashes and fees, sending and simulating, and transaction history and statuses."""

    # ------------------------------------------------------------ blockhashes and fees

    def m_getLatestBlockhash(self, params: list[Any]) -> Any:
        return self._ctx(
            {
                "blockhash": str(self.chain.latest_blockhash()),
                "lastValidBlockHeight": self.chain.last_valid_block_height(),
            }
        )

    def m_isBlockhashValid(self, params: list[Any]) -> Any:
        raw = required(params, 0, "blockhash")
        try:
            blockhash = Hash.from_string(raw)
        except (ValueError, TypeError, ParseHashError) as exc:
            raise invalid_params("Invalid param: Invalid") from exc
        return self._ctx(self.chain.is_blockhash_valid(blockhash))

    def m_getFeeForMessage(self, params: list[Any]) -> Any:
        raw = required(params, 0, "message")
        try:
            msg = from_bytes_versioned(base64.b64decode(raw, validate=True))
        except Exception as exc:
            raise invalid_params(f"invalid message: {exc}") from exc
        if not self.chain.is_blockhash_valid(msg.recent_blockhash):
            return self._ctx(None)
        return self._ctx(self.chain.fee_for_message(msg))

    def m_getRecentPrioritizationFees(self, params: list[Any]) -> Any:
        addrs = arg(params, 0) or []
        if not isinstance(addrs, list):
            raise invalid_params("Invalid params: expected an array of addresses")
        if len(addrs) > 128:
            raise invalid_params("Too many inputs provided; max 128")
        return self.chain.recent_prioritization_fees([as_pubkey(a) for a in addrs])

    # ------------------------------------------------------------ transactions

    def m_sendTransaction(self, params: list[Any]) -> Any:
        cfg = config(params, 1)
        tx = decode_transaction(required(params, 0, "transaction"), cfg.get("encoding") or "base58")
        return str(self.chain.send(tx, skip_preflight=bool(cfg.get("skipPreflight", False))))

    def m_simulateTransaction(self, params: list[Any]) -> Any:
        cfg = config(params, 1)
        tx = decode_transaction(required(params, 0, "transaction"), cfg.get("encoding") or "base58")
        sig_verify = bool(cfg.get("sigVerify", False))
        replace = bool(cfg.get("replaceRecentBlockhash", False))
        if sig_verify and replace:
            raise invalid_params("sigVerify may not be used with replaceRecentBlockhash")
        value, post = self.chain.simulate(
            tx,
            sig_verify=sig_verify,
            replace_recent_blockhash=replace,
            inner_instructions=bool(cfg.get("innerInstructions", False)),
        )
        accounts_cfg = cfg.get("accounts")
        if isinstance(accounts_cfg, dict) and value["err"] is None:
            encoding = accounts_cfg.get("encoding") or "base64"
            check_account_encoding(encoding)
            post_by_key = dict(post)
            rendered = []
            for addr in accounts_cfg.get("addresses") or []:
                key = as_pubkey(addr)
                account = post_by_key.get(key) or self.chain.get_account(key)
                rendered.append(
                    None if account is None else encode_account(account, encoding, None, self.chain.get_account)
                )
            value["accounts"] = rendered
        return self._ctx(value)

    def m_getTransaction(self, params: list[Any]) -> Any:
        sig = as_signature(required(params, 0, "signature"))
        encoding, cfg = tx_config(params, 1, "json")
        rec = self.chain.txs.get(sig)
        if rec is None:
            return None
        return {
            "blockTime": rec.block_time,
            "slot": rec.slot,
            **render_tx_with_meta(rec, encoding, max_version_of(cfg)),
        }

    def m_getSignatureStatuses(self, params: list[Any]) -> Any:
        sigs = required(params, 0, "signatures")
        if not isinstance(sigs, list):
            raise invalid_params("Invalid params: expected an array of signatures")
        if len(sigs) > 256:
            raise invalid_params("Too many inputs provided; max 256")
        return self._ctx([self.chain.signature_status(as_signature(s)) for s in sigs])

    def m_getSignaturesForAddress(self, params: list[Any]) -> Any:
        address = as_pubkey(required(params, 0, "address"))
        cfg = config(params, 1)
        limit = as_uint(cfg.get("limit") or 1000, "limit")
        if not 1 <= limit <= 1000:
            raise invalid_params("Invalid limit; max 1000")
        before = as_signature(cfg["before"]) if cfg.get("before") else None
        until = as_signature(cfg["until"]) if cfg.get("until") else None
        return [
            {
                "blockTime": rec.block_time,
                "confirmationStatus": COMMITMENT_NAMES[self.chain.commitment_of(rec)],
                "err": rec.err,
                "memo": _memo(rec),
                "signature": str(rec.signature),
                "slot": rec.slot,
            }
            for rec in self.chain.signatures_for_address(address, before, until, limit)
        ]

    def m_getTransactionCount(self, params: list[Any]) -> Any:
        return self.chain.transaction_count

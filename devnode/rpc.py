"""The JSON-RPC method table: name -> handler, with mainnet's parameter rules and error shapes.

Handlers are synchronous (the chain is); `RpcDispatcher.handle` takes a decoded JSON-RPC payload
(single or batch) and returns the response payload, or None when there is nothing to answer."""

from __future__ import annotations

import base64
import binascii
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import base58
from solders.account import Account
from solders.hash import Hash
from solders.message import from_bytes_versioned
from solders.pubkey import Pubkey
from solders.signature import Signature
from solders.transaction import VersionedTransaction

from devnode.chain import COMMITMENT_NAMES, IDENTITY, VOTE_ACCOUNT, Chain
from devnode.encoding import (
    check_account_encoding,
    check_tx_encoding,
    encode_account,
    render_meta,
    render_transaction,
    render_tx_with_meta,
)
from devnode.errors import (
    INVALID_REQUEST,
    METHOD_NOT_FOUND,
    MIN_CONTEXT_SLOT_NOT_REACHED,
    RpcError,
    block_cleaned_up,
    block_not_available,
    invalid_params,
)
from devnode.parsing import MEMO_PROGRAM_IDS
from devnode.records import Block, TxRecord
from devnode.tokens import TOKEN_PROGRAMS, decode_mint, decode_token_account, ui_token_amount

API_VERSION = "2.3.0"
CORE_VERSION = "2.3.0-devnode"
FEATURE_SET = 3_294_202_862
TOTAL_STAKE = 100_000 * 10**9
TOTAL_SUPPLY = 600_000_000 * 10**9
MAX_BASE58_TX = 1683
MAX_BASE64_TX = 1644
MAX_SLOT_RANGE = 500_000

_ACCOUNTS_ONLY_META = ("err", "fee", "postBalances", "postTokenBalances", "preBalances", "preTokenBalances", "status")
Handler = Callable[[list[Any]], Any]


@dataclass(frozen=True)
class NodeInfo:
    """Where the node listens (for getClusterNodes) and how fast its slots are."""

    host: str
    rpc_port: int
    ws_port: int
    slot_ms: int


# ---------------------------------------------------------------- parameter helpers


def _arg(params: list[Any], i: int, default: Any = None) -> Any:
    return params[i] if len(params) > i else default


def _required(params: list[Any], i: int, what: str) -> Any:
    if len(params) <= i:
        raise invalid_params(f"Invalid params: missing field `{what}`")
    return params[i]


def _config(params: list[Any], i: int) -> dict[str, Any]:
    cfg = _arg(params, i)
    if cfg is None:
        return {}
    if not isinstance(cfg, dict):
        raise invalid_params("Invalid params: expected a config object")
    return cfg


def _pubkey(value: Any) -> Pubkey:
    if not isinstance(value, str):
        raise invalid_params("Invalid params: expected a base-58 encoded public key string")
    try:
        return Pubkey.from_string(value)
    except ValueError as exc:
        raise invalid_params(f"Invalid param: {exc}") from exc


def _signature(value: Any) -> Signature:
    if not isinstance(value, str):
        raise invalid_params("Invalid params: expected a base-58 encoded signature string")
    try:
        return Signature.from_string(value)
    except ValueError as exc:
        raise invalid_params("Invalid param: Invalid") from exc


def _int(value: Any, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise invalid_params(f"Invalid params: `{what}` must be an unsigned integer")
    return value


def _max_version(cfg: dict[str, Any]) -> int | None:
    value = cfg.get("maxSupportedTransactionVersion")
    if value is None:
        return None
    return _int(value, "maxSupportedTransactionVersion")


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


class RpcDispatcher:
    """Answers JSON-RPC requests against a `Chain`."""

    def __init__(self, chain: Chain, info: NodeInfo, airdrop: Callable[[Pubkey, int], Signature] | None = None) -> None:
        self.chain = chain
        self.info = info
        self._airdrop = airdrop or chain.airdrop
        self._leader_schedule: tuple[int, dict[str, list[int]]] | None = None
        self.methods: dict[str, Handler] = {
            name[len("m_") :]: getattr(self, name) for name in dir(self) if name.startswith("m_")
        }

    # ------------------------------------------------------------ dispatch

    def handle(self, payload: Any) -> Any:
        """A decoded request or batch in, the response (or None for notifications only) out."""
        if isinstance(payload, list):
            if not payload:
                return _error(None, RpcError(INVALID_REQUEST, "Invalid request"))
            out = [r for r in (self._one(p) for p in payload) if r is not None]
            return out or None
        return self._one(payload)

    def _one(self, req: Any) -> dict[str, Any] | None:
        if not isinstance(req, dict) or req.get("jsonrpc") != "2.0" or not isinstance(req.get("method"), str):
            req_id = req.get("id") if isinstance(req, dict) else None
            return _error(req_id, RpcError(INVALID_REQUEST, "Invalid request"))
        req_id = req.get("id")
        is_notification = "id" not in req
        params = req.get("params", [])
        try:
            handler = self.methods.get(req["method"])
            if handler is None:
                raise RpcError(METHOD_NOT_FOUND, "Method not found")
            if params is None:
                params = []
            if not isinstance(params, list):
                raise invalid_params("Invalid params: invalid type: map, expected a sequence")
            self._check_min_context_slot(params)
            result = handler(params)
        except RpcError as exc:
            return None if is_notification else _error(req_id, exc)
        except Exception as exc:  # a bug must still answer the client
            return None if is_notification else _error(req_id, RpcError(-32603, f"Internal error: {exc}"))
        return None if is_notification else {"jsonrpc": "2.0", "result": result, "id": req_id}

    def _check_min_context_slot(self, params: list[Any]) -> None:
        for p in params:
            wanted = p.get("minContextSlot") if isinstance(p, dict) else None
            if isinstance(wanted, int) and wanted > self.chain.slot:
                raise RpcError(
                    MIN_CONTEXT_SLOT_NOT_REACHED,
                    "Minimum context slot has not been reached",
                    {"contextSlot": self.chain.slot},
                )

    def _ctx(self, value: Any) -> dict[str, Any]:
        return {"context": {"apiVersion": API_VERSION, "slot": self.chain.slot}, "value": value}

    # ------------------------------------------------------------ accounts

    def _account_json(self, pubkey: Pubkey, cfg: dict[str, Any], default_encoding: str) -> dict[str, Any] | None:
        encoding = cfg.get("encoding") or default_encoding
        check_account_encoding(encoding)
        account = self.chain.get_account(pubkey)
        if account is None:
            return None
        return encode_account(account, encoding, cfg.get("dataSlice"), self.chain.get_account)

    def _keyed(self, key: Pubkey, account: Account, encoding: str, cfg: dict[str, Any]) -> dict[str, Any]:
        return {
            "account": encode_account(account, encoding, cfg.get("dataSlice"), self.chain.get_account),
            "pubkey": str(key),
        }

    def m_getAccountInfo(self, params: list[Any]) -> Any:
        pubkey = _pubkey(_required(params, 0, "pubkey"))
        return self._ctx(self._account_json(pubkey, _config(params, 1), "binary"))

    def m_getMultipleAccounts(self, params: list[Any]) -> Any:
        keys = _required(params, 0, "pubkeys")
        if not isinstance(keys, list):
            raise invalid_params("Invalid params: expected an array of public keys")
        if len(keys) > 100:
            raise invalid_params("Too many inputs provided; max 100")
        cfg = _config(params, 1)
        return self._ctx([self._account_json(_pubkey(k), cfg, "base64") for k in keys])

    def m_getBalance(self, params: list[Any]) -> Any:
        account = self.chain.get_account(_pubkey(_required(params, 0, "pubkey")))
        return self._ctx(account.lamports if account is not None else 0)

    def m_getTokenAccountBalance(self, params: list[Any]) -> Any:
        account = self.chain.get_account(_pubkey(_required(params, 0, "pubkey")))
        if account is None:
            raise invalid_params("Invalid param: could not find account")
        state = decode_token_account(account)
        if state is None:
            raise invalid_params("Invalid param: not a Token account")
        decimals = self.chain.mint_decimals(state.mint)
        if decimals is None:
            raise invalid_params("Invalid param: could not find mint")
        return self._ctx(ui_token_amount(state.amount, decimals))

    def m_getTokenSupply(self, params: list[Any]) -> Any:
        account = self.chain.get_account(_pubkey(_required(params, 0, "mint")))
        if account is None:
            raise invalid_params("Invalid param: could not find mint")
        mint = decode_mint(account)
        if mint is None:
            raise invalid_params("Invalid param: not a Token mint")
        return self._ctx(ui_token_amount(mint.supply, mint.decimals))

    def m_getTokenAccountsByOwner(self, params: list[Any]) -> Any:
        owner = _pubkey(_required(params, 0, "owner"))
        flt = _required(params, 1, "filter")
        if not isinstance(flt, dict) or not ({"mint", "programId"} & flt.keys()):
            raise invalid_params("Invalid params: expected {mint} or {programId} filter")
        cfg = _config(params, 2)
        encoding = cfg.get("encoding") or "binary"
        check_account_encoding(encoding)
        mint = program = None
        if "mint" in flt:
            mint = _pubkey(flt["mint"])
            mint_account = self.chain.get_account(mint)
            if decode_mint(mint_account) is None:
                raise invalid_params("Invalid param: could not find mint")
        else:
            program = _pubkey(flt["programId"])
            if program not in TOKEN_PROGRAMS:
                raise invalid_params("Invalid param: unrecognized Token program id")
        out = []
        for key, account in self.chain.token_accounts_of(owner):
            state = decode_token_account(account)
            if state is None or (mint is not None and state.mint != mint):
                continue
            if program is not None and account.owner != program:
                continue
            out.append(self._keyed(key, account, encoding, cfg))
        return self._ctx(out)

    def m_getTokenLargestAccounts(self, params: list[Any]) -> Any:
        mint = _pubkey(_required(params, 0, "mint"))
        mint_account = self.chain.get_account(mint)
        mint_state = decode_mint(mint_account)
        if mint_account is None or mint_state is None:
            raise invalid_params("Invalid param: could not find mint")
        holders = []
        for key, account in self.chain.svm.get_program_accounts(mint_account.owner):
            state = decode_token_account(account)
            if state is not None and state.mint == mint:
                holders.append((state.amount, key))
        holders.sort(key=lambda h: -h[0])
        return self._ctx(
            [{"address": str(k), **ui_token_amount(amount, mint_state.decimals)} for amount, k in holders[:20]]
        )

    def m_getProgramAccounts(self, params: list[Any]) -> Any:
        program = _pubkey(_required(params, 0, "program_id"))
        cfg = _config(params, 1)
        encoding = cfg.get("encoding") or "binary"
        check_account_encoding(encoding)
        filters = cfg.get("filters") or []
        out = []
        for key, account in self.chain.svm.get_program_accounts(program):
            if all(account_matches(bytes(account.data), f) for f in filters):
                out.append(self._keyed(key, account, encoding, cfg))
        return self._ctx(out) if cfg.get("withContext") else out

    def m_getLargestAccounts(self, params: list[Any]) -> Any:
        accounts = [(a.lamports, k) for k in self.chain.touched if (a := self.chain.get_account(k)) is not None]
        accounts.sort(key=lambda x: -x[0])
        return self._ctx([{"address": str(k), "lamports": lamports} for lamports, k in accounts[:20]])

    def m_getSupply(self, params: list[Any]) -> Any:
        return self._ctx(
            {"circulating": TOTAL_SUPPLY, "nonCirculating": 0, "nonCirculatingAccounts": [], "total": TOTAL_SUPPLY}
        )

    def m_getMinimumBalanceForRentExemption(self, params: list[Any]) -> Any:
        return self.chain.svm.minimum_balance_for_rent_exemption(_int(_arg(params, 0, 0), "data_len"))

    def m_requestAirdrop(self, params: list[Any]) -> Any:
        pubkey = _pubkey(_required(params, 0, "pubkey"))
        lamports = _int(_required(params, 1, "lamports"), "lamports")
        try:
            return str(self._airdrop(pubkey, lamports))
        except ValueError as exc:
            raise RpcError(-32603, f"Internal error: {exc}") from exc

    # ------------------------------------------------------------ blockhashes and fees

    def m_getLatestBlockhash(self, params: list[Any]) -> Any:
        return self._ctx(
            {
                "blockhash": str(self.chain.latest_blockhash()),
                "lastValidBlockHeight": self.chain.last_valid_block_height(),
            }
        )

    def m_isBlockhashValid(self, params: list[Any]) -> Any:
        raw = _required(params, 0, "blockhash")
        try:
            blockhash = Hash.from_string(raw)
        except (ValueError, TypeError) as exc:
            raise invalid_params("Invalid param: Invalid") from exc
        return self._ctx(self.chain.is_blockhash_valid(blockhash))

    def m_getFeeForMessage(self, params: list[Any]) -> Any:
        raw = _required(params, 0, "message")
        try:
            msg = from_bytes_versioned(base64.b64decode(raw, validate=True))
        except Exception as exc:
            raise invalid_params(f"invalid message: {exc}") from exc
        if not self.chain.is_blockhash_valid(msg.recent_blockhash):
            return self._ctx(None)
        return self._ctx(self.chain.fee_for_message(msg))

    def m_getRecentPrioritizationFees(self, params: list[Any]) -> Any:
        addrs = _arg(params, 0) or []
        if not isinstance(addrs, list):
            raise invalid_params("Invalid params: expected an array of addresses")
        if len(addrs) > 128:
            raise invalid_params("Too many inputs provided; max 128")
        return self.chain.recent_prioritization_fees([_pubkey(a) for a in addrs])

    # ------------------------------------------------------------ transactions

    def m_sendTransaction(self, params: list[Any]) -> Any:
        cfg = _config(params, 1)
        tx = decode_transaction(_required(params, 0, "transaction"), cfg.get("encoding") or "base58")
        return str(self.chain.send(tx, skip_preflight=bool(cfg.get("skipPreflight", False))))

    def m_simulateTransaction(self, params: list[Any]) -> Any:
        cfg = _config(params, 1)
        tx = decode_transaction(_required(params, 0, "transaction"), cfg.get("encoding") or "base58")
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
                key = _pubkey(addr)
                account = post_by_key.get(key) or self.chain.get_account(key)
                rendered.append(
                    None if account is None else encode_account(account, encoding, None, self.chain.get_account)
                )
            value["accounts"] = rendered
        return self._ctx(value)

    def _tx_cfg(self, params: list[Any], i: int, default_encoding: str) -> tuple[str, dict[str, Any]]:
        raw = _arg(params, i)
        cfg = {"encoding": raw} if isinstance(raw, str) else _config(params, i)
        encoding = cfg.get("encoding") or default_encoding
        check_tx_encoding(encoding)
        return encoding, cfg

    def m_getTransaction(self, params: list[Any]) -> Any:
        sig = _signature(_required(params, 0, "signature"))
        encoding, cfg = self._tx_cfg(params, 1, "json")
        rec = self.chain.txs.get(sig)
        if rec is None:
            return None
        return {"blockTime": rec.block_time, "slot": rec.slot, **render_tx_with_meta(rec, encoding, _max_version(cfg))}

    def m_getSignatureStatuses(self, params: list[Any]) -> Any:
        sigs = _required(params, 0, "signatures")
        if not isinstance(sigs, list):
            raise invalid_params("Invalid params: expected an array of signatures")
        if len(sigs) > 256:
            raise invalid_params("Too many inputs provided; max 256")
        return self._ctx([self.chain.signature_status(_signature(s)) for s in sigs])

    def m_getSignaturesForAddress(self, params: list[Any]) -> Any:
        address = _pubkey(_required(params, 0, "address"))
        cfg = _config(params, 1)
        limit = _int(cfg.get("limit") or 1000, "limit")
        if not 1 <= limit <= 1000:
            raise invalid_params("Invalid limit; max 1000")
        before = _signature(cfg["before"]) if cfg.get("before") else None
        until = _signature(cfg["until"]) if cfg.get("until") else None
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

    # ------------------------------------------------------------ blocks

    def _block(self, slot: int) -> Block:
        block = self.chain.blocks.get(slot)
        if block is not None:
            return block
        first = self.chain.first_available_block
        if slot < first:
            raise block_cleaned_up(slot, first)
        raise block_not_available(slot)

    def m_getBlock(self, params: list[Any]) -> Any:
        slot = _int(_required(params, 0, "slot"), "slot")
        encoding, cfg = self._tx_cfg(params, 1, "json")
        details = cfg.get("transactionDetails") or "full"
        if details not in ("full", "signatures", "none", "accounts"):
            raise invalid_params(f"Invalid params: unknown variant `{details}`")
        block = self._block(slot)
        max_version = _max_version(cfg)
        out: dict[str, Any] = {
            "blockHeight": block.block_height,
            "blockTime": block.block_time,
            "blockhash": str(block.blockhash),
            "parentSlot": block.parent_slot,
            "previousBlockhash": str(block.previous_blockhash),
        }
        records = [self.chain.txs[s] for s in block.signatures if s in self.chain.txs]
        if details == "full":
            out["transactions"] = [render_tx_with_meta(r, encoding, max_version) for r in records]
        elif details == "signatures":
            out["signatures"] = [str(r.signature) for r in records]
        elif details == "accounts":
            out["transactions"] = [self._accounts_only(r, max_version) for r in records]
        if cfg.get("rewards", True):
            out["rewards"] = []
        return out

    @staticmethod
    def _accounts_only(rec: TxRecord, max_version: int | None) -> dict[str, Any]:
        full = render_tx_with_meta(rec, "jsonParsed", max_version)
        meta = render_meta(rec, True)
        out: dict[str, Any] = {
            "meta": {k: meta[k] for k in _ACCOUNTS_ONLY_META},
            "transaction": {
                "accountKeys": render_transaction(rec, "jsonParsed")["message"]["accountKeys"],
                "signatures": [str(s) for s in rec.transaction.signatures],
            },
        }
        if "version" in full:
            out["version"] = full["version"]
        return out

    def _closed_range(self, start: int, end: int) -> list[int]:
        first = self.chain.first_available_block
        return [s for s in range(max(start, first), end + 1) if s in self.chain.blocks]

    def m_getBlocks(self, params: list[Any]) -> Any:
        start = _int(_required(params, 0, "start_slot"), "start_slot")
        raw_end = _arg(params, 1)
        last = self.chain.last_block.slot
        end = last if raw_end is None or isinstance(raw_end, dict) else min(_int(raw_end, "end_slot"), last)
        if end - start > MAX_SLOT_RANGE:
            raise invalid_params(f"Slot range too large; max {MAX_SLOT_RANGE}")
        return self._closed_range(start, end)

    def m_getBlocksWithLimit(self, params: list[Any]) -> Any:
        start = _int(_required(params, 0, "start_slot"), "start_slot")
        limit = _int(_required(params, 1, "limit"), "limit")
        if limit > MAX_SLOT_RANGE:
            raise invalid_params(f"Limit too large; max {MAX_SLOT_RANGE}")
        end = min(start + limit - 1, self.chain.last_block.slot)
        return self._closed_range(start, end)[:limit]

    def m_getBlockTime(self, params: list[Any]) -> Any:
        return self._block(_int(_required(params, 0, "slot"), "slot")).block_time

    def m_getBlockHeight(self, params: list[Any]) -> Any:
        return self.chain.block_height

    def m_getBlockCommitment(self, params: list[Any]) -> Any:
        slot = _int(_required(params, 0, "slot"), "slot")
        commitment = None
        if slot in self.chain.blocks:
            commitment = [0] * 32
            commitment[min(self.chain.slot - slot, 31)] = TOTAL_STAKE
        return {"commitment": commitment, "totalStake": TOTAL_STAKE}

    def m_getBlockProduction(self, params: list[Any]) -> Any:
        cfg = _config(params, 0)
        rng = cfg.get("range") or {}
        epoch_start = self.chain.epoch_schedule.get_first_slot_in_epoch(self.chain.epoch)
        first = _int(rng.get("firstSlot", epoch_start), "firstSlot")
        last = _int(rng.get("lastSlot", self.chain.slot), "lastSlot")
        count = max(0, min(last, self.chain.slot) - first + 1)
        identity = str(IDENTITY.pubkey())
        by_identity = {} if cfg.get("identity") not in (None, identity) else {identity: [count, count]}
        return self._ctx({"byIdentity": by_identity, "range": {"firstSlot": first, "lastSlot": last}})

    def m_getFirstAvailableBlock(self, params: list[Any]) -> Any:
        return self.chain.first_available_block

    def m_minimumLedgerSlot(self, params: list[Any]) -> Any:
        return self.chain.first_available_block

    # ------------------------------------------------------------ cluster

    def m_getSlot(self, params: list[Any]) -> Any:
        return self.chain.slot

    def m_getSlotLeader(self, params: list[Any]) -> Any:
        return str(IDENTITY.pubkey())

    def m_getSlotLeaders(self, params: list[Any]) -> Any:
        _int(_required(params, 0, "start_slot"), "start_slot")
        limit = _int(_required(params, 1, "limit"), "limit")
        if limit > 5000:
            raise invalid_params("Invalid limit; max 5000")
        return [str(IDENTITY.pubkey())] * limit

    def m_getLeaderSchedule(self, params: list[Any]) -> Any:
        raw = _arg(params, 0)
        cfg = raw if isinstance(raw, dict) else _config(params, 1)
        slot = raw if isinstance(raw, int) else self.chain.slot
        epoch = int(self.chain.epoch_schedule.get_epoch(slot))
        if epoch > self.chain.epoch + 1:
            return None
        identity = str(IDENTITY.pubkey())
        if cfg.get("identity") not in (None, identity):
            return {}
        if self._leader_schedule is None or self._leader_schedule[0] != epoch:
            n = int(self.chain.epoch_schedule.get_slots_in_epoch(epoch))
            self._leader_schedule = (epoch, {identity: list(range(n))})
        return self._leader_schedule[1]

    def m_getEpochInfo(self, params: list[Any]) -> Any:
        epoch, index = self.chain.epoch_schedule.get_epoch_and_slot_index(self.chain.slot)
        return {
            "absoluteSlot": self.chain.slot,
            "blockHeight": self.chain.block_height,
            "epoch": epoch,
            "slotIndex": index,
            "slotsInEpoch": self.chain.epoch_schedule.get_slots_in_epoch(epoch),
            "transactionCount": self.chain.transaction_count,
        }

    def m_getEpochSchedule(self, params: list[Any]) -> Any:
        es = self.chain.epoch_schedule
        return {
            "firstNormalEpoch": es.first_normal_epoch,
            "firstNormalSlot": es.first_normal_slot,
            "leaderScheduleSlotOffset": es.leader_schedule_slot_offset,
            "slotsPerEpoch": es.slots_per_epoch,
            "warmup": es.warmup,
        }

    def m_getGenesisHash(self, params: list[Any]) -> Any:
        return str(self.chain.genesis_hash)

    def m_getHealth(self, params: list[Any]) -> Any:
        return "ok"

    def m_getHighestSnapshotSlot(self, params: list[Any]) -> Any:
        return {"full": self.chain.first_available_block, "incremental": None}

    def m_getIdentity(self, params: list[Any]) -> Any:
        return {"identity": str(IDENTITY.pubkey())}

    def m_getInflationGovernor(self, params: list[Any]) -> Any:
        return {"foundation": 0.0, "foundationTerm": 0.0, "initial": 0.08, "taper": 0.15, "terminal": 0.015}

    def m_getInflationRate(self, params: list[Any]) -> Any:
        return {"epoch": self.chain.epoch, "foundation": 0.0, "total": 0.08, "validator": 0.08}

    def m_getMaxRetransmitSlot(self, params: list[Any]) -> Any:
        return self.chain.slot

    def m_getMaxShredInsertSlot(self, params: list[Any]) -> Any:
        return self.chain.slot

    def m_getRecentPerformanceSamples(self, params: list[Any]) -> Any:
        limit = _int(_arg(params, 0, 720) or 720, "limit")
        if limit > 720:
            raise invalid_params("Invalid limit; max 720")
        per_sample = max(1, 60_000 // max(1, self.info.slot_ms))
        blocks = list(self.chain.blocks.values())
        samples: list[dict[str, int]] = []
        while blocks and len(samples) < limit:
            chunk, blocks = blocks[-per_sample:], blocks[:-per_sample]
            n = sum(len(b.signatures) for b in chunk)
            samples.append(
                {
                    "numNonVoteTransactions": n,
                    "numSlots": len(chunk),
                    "numTransactions": n,
                    "samplePeriodSecs": 60,
                    "slot": chunk[-1].slot,
                }
            )
        return samples

    def m_getStakeMinimumDelegation(self, params: list[Any]) -> Any:
        return self._ctx(1)

    def m_getVersion(self, params: list[Any]) -> Any:
        return {"feature-set": FEATURE_SET, "solana-core": CORE_VERSION}

    def m_getVoteAccounts(self, params: list[Any]) -> Any:
        epoch = self.chain.epoch
        return {
            "current": [
                {
                    "activatedStake": TOTAL_STAKE,
                    "commission": 0,
                    "epochCredits": [[epoch, self.chain.slot, 0]],
                    "epochVoteAccount": True,
                    "lastVote": max(self.chain.slot - 1, 0),
                    "nodePubkey": str(IDENTITY.pubkey()),
                    "rootSlot": self.chain.root,
                    "votePubkey": str(VOTE_ACCOUNT),
                }
            ],
            "delinquent": [],
        }

    def m_getClusterNodes(self, params: list[Any]) -> Any:
        host = self.info.host
        return [
            {
                "featureSet": FEATURE_SET,
                "gossip": f"{host}:8001",
                "pubkey": str(IDENTITY.pubkey()),
                "pubsub": f"{host}:{self.info.ws_port}",
                "rpc": f"{host}:{self.info.rpc_port}",
                "serveRepair": None,
                "shredVersion": 1,
                "tpu": None,
                "tpuForwards": None,
                "tpuForwardsQuic": None,
                "tpuQuic": None,
                "tpuVote": None,
                "tvu": None,
                "version": CORE_VERSION,
            }
        ]


def account_matches(data: bytes, flt: Any) -> bool:
    """getProgramAccounts / programSubscribe filters: dataSize and memcmp (base58 or base64 bytes)."""
    if not isinstance(flt, dict):
        raise invalid_params("Invalid params: filter must be an object")
    if "dataSize" in flt:
        return len(data) == int(flt["dataSize"])
    if "memcmp" in flt:
        memcmp = flt["memcmp"]
        offset = int(memcmp.get("offset", 0))
        encoded = memcmp.get("bytes", "")
        try:
            want = base64.b64decode(encoded) if memcmp.get("encoding") == "base64" else base58.b58decode(encoded)
        except ValueError as exc:
            raise invalid_params(f"Invalid param: invalid memcmp bytes: {exc}") from exc
        return data[offset : offset + len(want)] == want
    raise invalid_params("Invalid params: unsupported filter")


def _error(req_id: Any, exc: RpcError) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "error": exc.to_json(), "id": req_id}

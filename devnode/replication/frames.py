"""The replication wire: what the leader's log holds (`TxEvent`, `SlotEvent`, `WriteEvent`), the base a
follower loads (`ChainSnapshot`) and the frames around them, as compact orjson objects.

Every frame is one JSON object with its kind in ``"t"``. Bytes travel as base64 (transactions, account data),
keys, signatures and hashes as base58; the rest of a `TxRecord` is already in mainnet's JSON shapes and is
carried as it is, so a decoded record renders exactly as the leader's does. Accounts are
``[lamports, data, owner, executable, rent_epoch]``, or null for an account the transaction closed.

Kinds: ``hello`` (the leader's genesis, window, slot and whether a base follows), ``base`` (a `ChainSnapshot`
and the sequence number of the first event after it), ``tx``, ``slot`` and ``set`` (the log's events, each
with its sequence number ``"n"``), ``live`` (the backlog is sent; what follows happens as it happens).
"""

from __future__ import annotations

import base64
import binascii
from dataclasses import dataclass
from typing import Any

import orjson
from solders.account import Account
from solders.hash import Hash
from solders.pubkey import Pubkey
from solders.signature import Signature
from solders.transaction import VersionedTransaction

from devnode.records import Block, ChainSnapshot, TxRecord

Changed = list[tuple[Pubkey, Account | None]]


@dataclass
class TxEvent:
    """A transaction landed in the open slot, with the accounts it changed (as `Chain._record` hands them)."""

    seq: int
    rec: TxRecord
    changed: Changed

    @property
    def slot(self) -> int:
        return self.rec.slot


@dataclass
class SlotEvent:
    """The open slot closed with `block`; `next_slot` opened at `open_time`; the leader's root then."""

    seq: int
    block: Block
    next_slot: int
    open_time: int
    root: int

    @property
    def slot(self) -> int:
        """The slot this event opens (a lagging follower applies it once the leader is `lag` slots past it)."""
        return self.next_slot


@dataclass
class WriteEvent:
    """Accounts written outside any transaction (`Chain.set_genesis_account`) while `slot` was open."""

    seq: int
    slot: int
    accounts: list[tuple[Pubkey, Account]]


Event = TxEvent | SlotEvent | WriteEvent


@dataclass(frozen=True)
class Hello:
    """The leader's first frame: its genesis, its log (`log_id`, `window` slots), its open slot, and whether a
    base follows (`resync`) or the events after the follower's position do."""

    genesis_hash: Hash
    log_id: str
    window: int
    slot: int
    resync: bool


@dataclass(frozen=True)
class Base:
    snapshot: ChainSnapshot
    next_seq: int  # the sequence number of the first event after the snapshot


@dataclass(frozen=True)
class Live:
    slot: int  # the leader's open slot when the backlog was through


Frame = Hello | Base | Live | TxEvent | SlotEvent | WriteEvent


# ---------------------------------------------------------------- values


def _b64(raw: bytes) -> str:
    return base64.b64encode(raw).decode()


def account_json(account: Account | None) -> list[Any] | None:
    if account is None:
        return None
    return [account.lamports, _b64(bytes(account.data)), str(account.owner), account.executable, account.rent_epoch]


def account_from(obj: list[Any] | None) -> Account | None:
    if obj is None:
        return None
    lamports, data, owner, executable, rent_epoch = obj
    return Account(
        int(lamports), binascii.a2b_base64(data), Pubkey.from_string(owner), bool(executable), int(rent_epoch)
    )


def _accounts_json(accounts: list[tuple[Pubkey, Account | None]]) -> list[list[Any]]:
    return [[str(key), account_json(account)] for key, account in accounts]


def _accounts_from(obj: list[list[Any]]) -> Changed:
    return [(Pubkey.from_string(key), account_from(account)) for key, account in obj]


def _keys(keys: list[Pubkey]) -> list[str]:
    return [str(k) for k in keys]


def _keys_from(obj: list[str]) -> list[Pubkey]:
    return [Pubkey.from_string(k) for k in obj]


def record_json(rec: TxRecord) -> dict[str, Any]:
    return {
        "sig": str(rec.signature),
        "slot": rec.slot,
        "time": rec.block_time,
        "index": rec.index,
        "tx": _b64(bytes(rec.transaction)),
        "keys": _keys(rec.account_keys),
        "w": rec.writable,
        "s": rec.signer,
        "lw": _keys(rec.loaded_writable),
        "lr": _keys(rec.loaded_readonly),
        "err": rec.err,
        "fee": rec.fee,
        "pre": rec.pre_balances,
        "post": rec.post_balances,
        "preTok": rec.pre_token_balances,
        "postTok": rec.post_token_balances,
        "logs": rec.log_messages,
        "inner": rec.inner_instructions,
        "cu": rec.compute_units,
        "ret": rec.return_data,
        "prio": rec.priority_fee,
        "inj": rec.injected,
    }


def record_from(obj: dict[str, Any]) -> TxRecord:
    return TxRecord(
        signature=Signature.from_string(obj["sig"]),
        slot=obj["slot"],
        block_time=obj["time"],
        index=obj["index"],
        transaction=VersionedTransaction.from_bytes(binascii.a2b_base64(obj["tx"])),
        account_keys=_keys_from(obj["keys"]),
        writable=obj["w"],
        signer=obj["s"],
        loaded_writable=_keys_from(obj["lw"]),
        loaded_readonly=_keys_from(obj["lr"]),
        err=obj["err"],
        fee=obj["fee"],
        pre_balances=obj["pre"],
        post_balances=obj["post"],
        pre_token_balances=obj["preTok"],
        post_token_balances=obj["postTok"],
        log_messages=obj["logs"],
        inner_instructions=obj["inner"],
        compute_units=obj["cu"],
        return_data=obj["ret"],
        priority_fee=obj["prio"],
        injected=obj["inj"],
    )


def block_json(block: Block) -> dict[str, Any]:
    return {
        "slot": block.slot,
        "parent": block.parent_slot,
        "height": block.block_height,
        "hash": str(block.blockhash),
        "prev": str(block.previous_blockhash),
        "time": block.block_time,
        "sigs": [str(s) for s in block.signatures],
    }


def block_from(obj: dict[str, Any]) -> Block:
    return Block(
        slot=obj["slot"],
        parent_slot=obj["parent"],
        block_height=obj["height"],
        blockhash=Hash.from_string(obj["hash"]),
        previous_blockhash=Hash.from_string(obj["prev"]),
        block_time=obj["time"],
        signatures=[Signature.from_string(s) for s in obj["sigs"]],
    )


def snapshot_json(snap: ChainSnapshot) -> dict[str, Any]:
    return {
        "genesis": str(snap.genesis_hash),
        "start": snap.start_time,
        "slot": snap.slot,
        "height": snap.block_height,
        "open": snap.open_time,
        "count": snap.transaction_count,
        "block": block_json(snap.block),
        "blockTxs": [record_json(r) for r in snap.block_records],
        "openTxs": [record_json(r) for r in snap.open_records],
        "hashes": [[str(h), last] for h, last in snap.hash_valid.items()],
        "accounts": _accounts_json(list(snap.accounts.items())),
    }


def snapshot_from(obj: dict[str, Any]) -> ChainSnapshot:
    return ChainSnapshot(
        genesis_hash=Hash.from_string(obj["genesis"]),
        start_time=obj["start"],
        slot=obj["slot"],
        block_height=obj["height"],
        open_time=obj["open"],
        transaction_count=obj["count"],
        block=block_from(obj["block"]),
        block_records=[record_from(r) for r in obj["blockTxs"]],
        open_records=[record_from(r) for r in obj["openTxs"]],
        hash_valid={Hash.from_string(h): last for h, last in obj["hashes"]},
        accounts=dict(_accounts_from(obj["accounts"])),
    )


# ---------------------------------------------------------------- frames


def encode(frame: Frame) -> bytes:
    return orjson.dumps(_frame_json(frame))


def _frame_json(frame: Frame) -> dict[str, Any]:
    match frame:
        case TxEvent(seq, rec, changed):
            return {"t": "tx", "n": seq, "rec": record_json(rec), "changed": _accounts_json(changed)}
        case SlotEvent(seq, block, next_slot, open_time, root):
            return {
                "t": "slot",
                "n": seq,
                "block": block_json(block),
                "next": next_slot,
                "open": open_time,
                "root": root,
            }
        case WriteEvent(seq, slot, accounts):
            return {"t": "set", "n": seq, "slot": slot, "accounts": _accounts_json(list(accounts))}
        case Hello(genesis_hash, log_id, window, slot, resync):
            return {
                "t": "hello",
                "genesis": str(genesis_hash),
                "log": log_id,
                "window": window,
                "slot": slot,
                "resync": resync,
            }
        case Base(snapshot, next_seq):
            return {"t": "base", "next": next_seq, "snapshot": snapshot_json(snapshot)}
        case Live(slot):
            return {"t": "live", "slot": slot}
    raise TypeError(f"not a replication frame: {frame!r}")


def decode(raw: bytes | str) -> Frame:
    """A frame off the wire; `ValueError` (or a `KeyError`) for one that is not."""
    obj = orjson.loads(raw)
    kind = obj["t"]
    if kind == "tx":
        return TxEvent(obj["n"], record_from(obj["rec"]), _accounts_from(obj["changed"]))
    if kind == "slot":
        return SlotEvent(obj["n"], block_from(obj["block"]), obj["next"], obj["open"], obj["root"])
    if kind == "set":
        written = [(key, account) for key, account in _accounts_from(obj["accounts"]) if account is not None]
        return WriteEvent(obj["n"], obj["slot"], written)
    if kind == "hello":
        return Hello(Hash.from_string(obj["genesis"]), obj["log"], obj["window"], obj["slot"], obj["resync"])
    if kind == "base":
        return Base(snapshot_from(obj["snapshot"]), obj["next"])
    if kind == "live":
        return Live(obj["slot"])
    raise ValueError(f"unknown replication frame kind {kind!r}")

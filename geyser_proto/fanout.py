"""The fan-out of one feed of geyser updates to many streams: each update is matched once per process.

Every stream (a :class:`Member`: its sink and its compiled :class:`~geyser_proto.filters.Filters`) is
registered here. Identical filters of different streams are one hashable value, so
:meth:`Fanout.publish` evaluates each *distinct* filter once per update, through an index by account
key and owner (a filter whose keys the update does not carry is not even looked at), then hands each
matching stream the update encoded once: the update's body is serialized once (once per data-slice
set for account updates) and only the ``filters`` field (the names that matched) is prefixed per
stream, which protobuf allows since a message's fields may come in any order.

Commitment: updates arrive at ``processed`` (the feed is the node's own, or an upstream subscription
at processed). A stream at ``confirmed`` or ``finalized`` gets account, transaction and block-meta
updates when a slot update says their slot reached that level; they wait here meanwhile, for at most
``pending_slots`` slots (a slot that never gets there was on a dropped fork). Slot updates go out at
once, filtered by ``filter_by_commitment``. ``transactions_status`` updates are derived from the
transaction updates, as the public server derives them.

:meth:`Fanout.wanted` is the union of every stream's filters as one request at processed, for a server
that re-serves an upstream's stream (the gateway): the upstream sends a superset, matched here
(:func:`union_request` builds it for any set of streams' filters).

Pure: no I/O, no clock; a sink's ``deliver`` must not block (a server queues what it is handed).
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable
from dataclasses import dataclass, field
from typing import Any, Protocol, TypeVar, cast

from geyser_proto import geyser_pb2
from geyser_proto.filters import (
    CONFIRMED,
    EMPTY,
    FINALIZED,
    PROCESSED,
    AccountFilter,
    Filters,
    SlotFilter,
    TransactionFilter,
    TxView,
)

SLOT_DEAD = 6
_NAMES_TAG = b"\x0a"  # SubscribeUpdate.filters: field 1, length-delimited
_MAX_PREFIXES = 64
F = TypeVar("F", AccountFilter, TransactionFilter)


class Sink(Protocol):
    """Where a stream's encoded updates go (a bounded queue the server drains); must not block."""

    def deliver(self, data: bytes) -> None: ...


def _varint(value: int) -> bytes:
    out = bytearray()
    while value > 0x7F:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def encode_names(names: Iterable[str]) -> bytes:
    """``SubscribeUpdate.filters`` on the wire, to prefix an update body encoded without it."""
    out = bytearray()
    for name in names:
        raw = name.encode()
        out += _NAMES_TAG + _varint(len(raw)) + raw
    return bytes(out)


@dataclass(eq=False)
class Member:
    """One stream: where its updates go and the filters its last request set."""

    sink: Sink
    filters: Filters = EMPTY
    generation: int = 0  # bumped by each new request: held updates of older filters are dropped
    alive: bool = True
    _prefixes: dict[tuple[str, ...], bytes] = field(default_factory=dict)

    def encode(self, names: tuple[str, ...], body: bytes) -> bytes:
        prefix = self._prefixes.get(names)
        if prefix is None:
            if len(self._prefixes) >= _MAX_PREFIXES:
                self._prefixes.clear()
            prefix = self._prefixes[names] = encode_names(names)
        return prefix + body


_Held = tuple[Member, int, int, bytes]  # (member, its generation then, its commitment, encoded update)


#: One stream's part of the index: (kind, the filter's key, the stream's entry under it).
_Entry = tuple[str, Hashable, Hashable]


def _keyed(index: dict[bytes, dict[F, None]], keys: Iterable[bytes], f: F, add: bool) -> int:
    """Index ``f`` under each of ``keys`` (or take it out); how many keys that touched."""
    count = 0
    for key in keys:
        count += 1
        if add:
            index.setdefault(key, {})[f] = None
            continue
        listed = index.get(key)
        if listed is not None:
            listed.pop(f, None)
            if not listed:
                del index[key]
    return count


def _tx_keys(tf: TransactionFilter) -> frozenset[bytes]:
    """The keys a transaction filter is indexed under: any transaction it matches loads one of its included
    keys, or (without any) its required ones; none: it is tried on every transaction."""
    return tf.include or (frozenset([min(tf.required)]) if tf.required else frozenset())


class Fanout:
    def __init__(self, *, pending_slots: int = 64) -> None:
        self.pending_slots = pending_slots
        self.members: dict[Member, None] = {}  # ordered
        self.version = 0  # bumped whenever the set of filters may have changed (see wanted())
        self.published = 0  # updates given to publish()
        self.evaluated = 0  # filter evaluations (distinct filters tried against an update)
        self.reindexed = 0  # keys put in or taken out of the indexes (a change costs what it changes)
        # Each distinct filter -> the streams' entries using it (ordered sets); the key indexes hold a
        # filter while any entry uses it, and change only when a filter appears or goes.
        self._accounts: dict[AccountFilter, dict[tuple[Member, str], None]] = {}
        self._account_keys: dict[bytes, dict[AccountFilter, None]] = {}
        self._account_owners: dict[bytes, dict[AccountFilter, None]] = {}
        self._account_any: dict[AccountFilter, None] = {}
        self._txs: dict[TransactionFilter, dict[tuple[Member, str, bool], None]] = {}  # bool: a status filter
        self._tx_keys: dict[bytes, dict[TransactionFilter, None]] = {}
        self._tx_any: dict[TransactionFilter, None] = {}
        self._slots: dict[tuple[SlotFilter, int], dict[tuple[Member, str], None]] = {}
        self._block_meta: dict[Member, None] = {}
        self._pending: dict[int, list[_Held]] = {}

    def wants(self, kind: str) -> bool:
        """Whether any stream has a filter for updates of ``kind`` (``transaction``, ``account``, ``slot``,
        ``block_meta``): a feed can skip building the others."""
        used = {
            "transaction": self._txs,
            "account": self._accounts,
            "slot": self._slots,
            "block_meta": self._block_meta,
        }
        return bool(used.get(kind))

    # -- streams ----------------------------------------------------------------------------------

    def attach(self, sink: Sink, filters: Filters = EMPTY) -> Member:
        member = Member(sink, filters)
        self.members[member] = None
        self._index(member, EMPTY, filters)
        self.version += 1
        return member

    def replace(self, member: Member, filters: Filters) -> None:
        """A new request on the stream: its filters replace the old ones for every later update."""
        old, member.filters = member.filters, filters
        member.generation += 1
        if member in self.members:
            self._index(member, old, filters)
        self.version += 1

    def detach(self, member: Member) -> None:
        member.alive = False
        if member in self.members:
            del self.members[member]
            self._index(member, member.filters, EMPTY)
            self.version += 1

    def _index(self, member: Member, old: Filters, new: Filters) -> None:
        """Move ``member`` from ``old`` to ``new`` filters in the indexes: only the entries that differ, and
        the keys of only the filters that appear or go (never every stream's, whatever their number)."""
        before, after = _entries(member, old), _entries(member, new)
        for entry in after - before:
            self._add(*entry)
        for entry in before - after:
            self._remove(*entry)

    def _add(self, kind: str, f: Hashable, entry: Hashable) -> None:
        if kind == "b":
            self._block_meta[cast(Member, entry)] = None
            return
        table = self._table(kind)
        entries = table.get(f)
        if entries is None:
            entries = table[f] = {}
            self._keys(kind, f, add=True)
        entries[entry] = None

    def _remove(self, kind: str, f: Hashable, entry: Hashable) -> None:
        if kind == "b":
            self._block_meta.pop(cast(Member, entry), None)
            return
        table = self._table(kind)
        entries = table.get(f)
        if entries is None:
            return
        entries.pop(entry, None)
        if not entries:
            del table[f]
            self._keys(kind, f, add=False)

    def _table(self, kind: str) -> dict[Any, dict[Any, None]]:
        if kind == "a":
            return self._accounts
        return self._txs if kind == "t" else self._slots

    def _keys(self, kind: str, f: Any, add: bool) -> None:
        """Index a filter that appeared under its keys, or take out one that went."""
        if kind == "a":
            af: AccountFilter = f
            if af.accounts:
                self.reindexed += _keyed(self._account_keys, af.accounts, af, add)
            elif af.owners:
                self.reindexed += _keyed(self._account_owners, af.owners, af, add)
            elif add:
                self._account_any[af] = None
            else:
                self._account_any.pop(af, None)
        elif kind == "t":
            tf: TransactionFilter = f
            keys = _tx_keys(tf)
            if keys:
                self.reindexed += _keyed(self._tx_keys, keys, tf, add)
            elif add:
                self._tx_any[tf] = None
            else:
                self._tx_any.pop(tf, None)

    def wanted(self) -> geyser_pb2.SubscribeRequest:
        """One request at processed whose updates are a superset of what every stream wants."""
        return union_request(member.filters for member in self.members)

    # -- updates ----------------------------------------------------------------------------------

    def publish(self, update: geyser_pb2.SubscribeUpdate) -> None:
        """Hand ``update`` (at processed) to every stream whose filters match it; its ``filters`` field
        is cleared (each stream gets its own names)."""
        self.published += 1
        kind = update.WhichOneof("update_oneof")
        if kind == "transaction":
            self._transaction(update)
        elif kind == "slot":
            self._slot(update)
        elif kind == "account":
            self._account(update)
        elif kind == "block_meta":
            self._block_meta_update(update)
        # pings, pongs and the kinds this project does not serve are not for the streams

    def _transaction(self, update: geyser_pb2.SubscribeUpdate) -> None:
        view = TxView.of(update.transaction.transaction)
        candidates: dict[TransactionFilter, None] = dict.fromkeys(self._tx_any)
        for key in view.keys:
            listed = self._tx_keys.get(key)
            if listed:
                candidates.update(dict.fromkeys(listed))
        hits: dict[Member, tuple[list[str], list[str]]] = {}
        for tf in candidates:
            self.evaluated += 1
            if tf.matches(view):
                for member, name, status in self._txs[tf]:
                    names = hits.get(member)
                    if names is None:
                        names = hits[member] = ([], [])
                    names[status].append(name)
        if not hits:
            return
        del update.filters[:]
        slot = update.transaction.slot
        body = status_body = b""
        for member, (tx_names, status_names) in hits.items():
            if tx_names:
                body = body or update.SerializeToString()
                self._send(member, tx_names, body, slot)
            if status_names:
                status_body = status_body or status_of(update).SerializeToString()
                self._send(member, status_names, status_body, slot)

    def _account(self, update: geyser_pb2.SubscribeUpdate) -> None:
        info = update.account.account
        hits: dict[Member, list[str]] = {}
        for listed in (self._account_keys.get(info.pubkey), self._account_owners.get(info.owner), self._account_any):
            for af in listed or ():
                self.evaluated += 1
                if af.matches(info):
                    for member, name in self._accounts[af]:
                        hits.setdefault(member, []).append(name)
        if not hits:
            return
        del update.filters[:]
        bodies: dict[tuple[tuple[int, int], ...], bytes] = {}
        for member, names in hits.items():
            slices = member.filters.data_slices
            body = bodies.get(slices)
            if body is None:
                body = bodies[slices] = _sliced(update, member.filters).SerializeToString()
            self._send(member, names, body, update.account.slot)

    def _block_meta_update(self, update: geyser_pb2.SubscribeUpdate) -> None:
        if not self._block_meta:
            return
        del update.filters[:]
        body = update.SerializeToString()
        for member in self._block_meta:
            self._send(member, list(member.filters.blocks_meta), body, update.block_meta.slot)

    def _slot(self, update: geyser_pb2.SubscribeUpdate) -> None:
        slot, status = update.slot.slot, update.slot.status
        if status in (CONFIRMED, FINALIZED):
            self._release(slot, status)
        elif status == SLOT_DEAD:
            self._pending.pop(slot, None)
        hits: dict[Member, list[str]] = {}
        for (sf, commitment), entries in self._slots.items():
            self.evaluated += 1
            if sf.matches(status, commitment):
                for member, name in entries:
                    hits.setdefault(member, []).append(name)
        if not hits:
            return
        del update.filters[:]
        body = update.SerializeToString()
        for member, names in hits.items():
            member.sink.deliver(member.encode(tuple(sorted(names)), body))

    def _send(self, member: Member, names: list[str], body: bytes, slot: int) -> None:
        data = member.encode(tuple(sorted(names)), body)
        commitment = member.filters.commitment
        if commitment == PROCESSED:
            member.sink.deliver(data)
            return
        self._hold(slot, (member, member.generation, commitment, data))

    def _hold(self, slot: int, entry: _Held) -> None:
        held = self._pending.get(slot)
        if held is None:
            held = self._pending[slot] = []
            while len(self._pending) > self.pending_slots:
                del self._pending[next(iter(self._pending))]
        held.append(entry)

    def take_held(self, source: Fanout, old: Member, member: Member) -> None:
        """Hold for ``member`` what ``source`` holds for ``old`` under its current filters: a stream handed over
        from a replay of the feed (matched by a fan-out of its own) to this one. They are released like the
        updates held here, after those already held for their slot."""
        for slot, held in source._pending.items():
            for holder, generation, commitment, data in held:
                if holder is old and generation == old.generation:
                    self._hold(slot, (member, member.generation, commitment, data))

    def _release(self, slot: int, status: int) -> None:
        held = self._pending.pop(slot, None)
        if held:
            kept: list[_Held] = []
            for entry in held:
                member, generation, commitment, data = entry
                if commitment > status:
                    kept.append(entry)
                elif member.alive and member.generation == generation:
                    member.sink.deliver(data)
            if kept:
                self._pending[slot] = kept
        if status == FINALIZED:  # what is older and still held was on a fork that will not be finalized
            for older in [s for s in self._pending if s < slot]:
                del self._pending[older]


def _entries(member: Member, f: Filters) -> set[_Entry]:
    """``member``'s entries in the indexes under filters ``f``."""
    out: set[_Entry] = {("a", af, (member, name)) for name, af in f.accounts}
    out.update(("t", tf, (member, name, False)) for name, tf in f.transactions)
    out.update(("t", tf, (member, name, True)) for name, tf in f.transactions_status)
    out.update(("s", (sf, f.commitment), (member, name)) for name, sf in f.slots)
    if f.blocks_meta:
        out.add(("b", None, member))
    return out


def union_request(streams: Iterable[Filters]) -> geyser_pb2.SubscribeRequest:
    """One request at processed whose updates are a superset of what each of ``streams`` wants: each
    distinct account and transaction filter once (a status filter is a transaction filter upstream)."""
    accounts: dict[AccountFilter, None] = {}
    txs: dict[TransactionFilter, None] = {}
    block_meta = False
    for f in streams:
        accounts.update(dict.fromkeys(af for _, af in f.accounts))
        txs.update(dict.fromkeys(tf for _, tf in (*f.transactions, *f.transactions_status)))
        block_meta = block_meta or bool(f.blocks_meta)
    request = geyser_pb2.SubscribeRequest(commitment=geyser_pb2.PROCESSED)
    request.slots["slots"].interslot_updates = True  # the commitment of held updates follows them
    for i, af in enumerate(accounts):
        request.accounts[f"accounts-{i}"].CopyFrom(af.to_proto())
    for i, tf in enumerate(txs):
        request.transactions[f"transactions-{i}"].CopyFrom(tf.to_proto())
    if block_meta:
        request.blocks_meta["blocks_meta"].SetInParent()
    return request


def status_of(update: geyser_pb2.SubscribeUpdate) -> geyser_pb2.SubscribeUpdate:
    """The ``transaction_status`` update of a ``transaction`` update."""
    tx = update.transaction
    info = tx.transaction
    status = geyser_pb2.SubscribeUpdateTransactionStatus(
        slot=tx.slot, signature=info.signature, is_vote=info.is_vote, index=info.index, bank_id=tx.bank_id
    )
    if info.meta.HasField("err"):
        status.err.CopyFrom(info.meta.err)
    out = geyser_pb2.SubscribeUpdate(transaction_status=status)
    if update.HasField("created_at"):
        out.created_at.CopyFrom(update.created_at)
    return out


def _sliced(update: geyser_pb2.SubscribeUpdate, filters: Filters) -> geyser_pb2.SubscribeUpdate:
    if not filters.data_slices:
        return update
    copy = geyser_pb2.SubscribeUpdate()
    copy.CopyFrom(update)
    copy.account.account.data = filters.slice(update.account.account.data)
    return copy

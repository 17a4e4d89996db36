"""Yellowstone's subscription filters, compiled and matched: pure, shared by every server of the stream.

A `SubscribeRequest` becomes one immutable :class:`Filters` (or a :class:`FilterError` saying what is
wrong with it); each filter kind is a frozen, hashable value, so identical filters of different
streams are one value and a fan-out can evaluate each distinct filter once per update
(:mod:`geyser_proto.fanout`). The semantics are the public server's:

- within one filter the fields combine with AND, the entries of a list with OR; an empty filter
  matches everything of its kind; an update lists the names of every filter it matched;
- accounts: ``account`` (any of) AND ``owner`` (any of) AND every entry of ``filters`` (memcmp,
  datasize, token_account_state, lamports) AND ``nonempty_txn_signature``;
- transactions: ``vote`` and ``failed`` unset mean either; ``signature``; ``account_include`` any
  of, ``account_exclude`` none of, ``account_required`` all of the keys the transaction loads
  (static keys and those loaded from lookup tables);
- slots: every processed, confirmed and finalized status, the other ones with ``interslot_updates``,
  only the stream's commitment with ``filter_by_commitment``;
- ``commitment`` (processed by default) holds account, transaction and block-meta updates back
  until their slot reaches it; ``accounts_data_slice`` sends only those parts of account data.

What this project's servers do not offer raises :class:`Unsupported` (answered ``UNIMPLEMENTED``):
``blocks``, ``entry`` and ``block_footer`` filters, cuckoo filters and the ``token_accounts`` expansion;
``from_slot`` unless the server keeps a replay log (``FilterLimits.from_slot``: the gateway's).

Every length is checked before anything is decoded (docs/api.md, gRPC limits): a request over
``FilterLimits.max_request_bytes`` or ``max_request_keys`` keys in all, a key longer than a base58 public key
(44 characters) or signature (88) can be, a memcmp longer than ``max_memcmp_bytes`` can encode to, is refused
at once; keys and signatures are then decoded by solders' native decoder (the pure-Python one below is
quadratic in the text's length and is only given texts already bounded).

Only protobuf, the generated messages and solders are imported here (the gateway and the devnode both use
it, and neither may import the other).
"""

from __future__ import annotations

import base64
import binascii
import itertools
import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from solders.pubkey import Pubkey
from solders.signature import Signature

from geyser_proto import geyser_pb2

PROCESSED, CONFIRMED, FINALIZED = 0, 1, 2
COMMITMENTS = {PROCESSED: "processed", CONFIRMED: "confirmed", FINALIZED: "finalized"}
#: Slot statuses every slot filter receives; the others only with ``interslot_updates``.
MAIN_STATUSES = frozenset({PROCESSED, CONFIRMED, FINALIZED})

_ALPHABET = "123456789ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz"
_INDEX = {c: i for i, c in enumerate(_ALPHABET)}
# An SPL token account is 165 bytes; a Token-2022 one is longer, with its account type (2) at 165.
_TOKEN_ACCOUNT_LEN = 165
_TOKEN_STATE_OFFSET = 108
_MULTISIG_LEN = 355
#: The longest base58 text of 32 bytes (a public key) and of 64 (a signature).
MAX_PUBKEY_CHARS = 44
MAX_SIGNATURE_CHARS = 88


def base58_chars(nbytes: int) -> int:
    """The longest base58 text of ``nbytes`` bytes (each leading zero byte is one ``1``)."""
    return math.ceil(nbytes * math.log(256, 58))


class FilterError(ValueError):
    """A request this server refuses as invalid (``INVALID_ARGUMENT``); the message says why."""


class Unsupported(FilterError):
    """A valid request for something this server does not offer (``UNIMPLEMENTED``)."""


def b58encode(raw: bytes) -> str:
    number = int.from_bytes(raw, "big")
    out = []
    while number:
        number, rem = divmod(number, 58)
        out.append(_ALPHABET[rem])
    zeros = len(raw) - len(raw.lstrip(b"\0"))
    return "1" * zeros + "".join(reversed(out))


def b58decode(text: str) -> bytes:
    number = 0
    for char in text:
        digit = _INDEX.get(char)
        if digit is None:
            raise ValueError(f"invalid base58 character {char!r}")
        number = number * 58 + digit
    zeros = len(text) - len(text.lstrip("1"))
    body = number.to_bytes((number.bit_length() + 7) // 8, "big") if number else b""
    return b"\0" * zeros + body


def _shown(text: str) -> str:
    """A client's text as an error message quotes it: at most its first 48 characters."""
    return repr(text) if len(text) <= 48 else f"{text[:48]!r}... ({len(text)} characters)"


def pubkey(text: str, what: str = "pubkey") -> bytes:
    """A base58 public key as its 32 bytes, or :class:`FilterError` (its length checked first)."""
    if len(text) <= MAX_PUBKEY_CHARS:
        try:
            return bytes(Pubkey.from_string(text))
        except ValueError:
            pass
    raise FilterError(f"invalid {what} {_shown(text)}: expected a base58 public key of 32 bytes")


def signature(text: str) -> bytes:
    """A base58 signature as its 64 bytes, or :class:`FilterError` (its length checked first)."""
    if len(text) <= MAX_SIGNATURE_CHARS:
        try:
            return bytes(Signature.from_string(text))
        except ValueError:
            pass
    raise FilterError(f"invalid signature {_shown(text)}: expected a base58 signature of 64 bytes")


@dataclass(frozen=True)
class FilterLimits:
    """What one request may ask for (the public server's limits are configured per deployment)."""

    max_filters: int = 64  # per kind (accounts, slots, transactions, ...)
    max_keys: int = 10_000  # per list of public keys
    max_account_filters: int = 4  # memcmp / datasize / token_account_state / lamports entries per filter
    max_memcmp_bytes: int = 128
    max_data_slices: int = 16
    max_name_length: int = 128
    max_request_keys: int = 10_000  # public keys in all the request's filters together
    max_request_bytes: int = 512 * 1024  # the serialized request (the transport takes at most twice this)
    from_slot: bool = False  # the server keeps a replay log, so a request may ask for ``from_slot``


DEFAULT_LIMITS = FilterLimits()


@dataclass(frozen=True, slots=True)
class TxView:
    """What transaction filters look at, computed once per transaction update."""

    signature: bytes
    is_vote: bool
    failed: bool
    keys: frozenset[bytes]

    @classmethod
    def of(cls, info: geyser_pb2.SubscribeUpdateTransactionInfo) -> TxView:
        message, meta = info.transaction.message, info.meta
        keys = frozenset([*message.account_keys, *meta.loaded_writable_addresses, *meta.loaded_readonly_addresses])
        return cls(info.signature, info.is_vote, meta.HasField("err"), keys)


@dataclass(frozen=True, slots=True)
class AccountFilter:
    accounts: frozenset[bytes] = frozenset()
    owners: frozenset[bytes] = frozenset()
    memcmp: tuple[tuple[int, bytes], ...] = ()
    datasize: int | None = None
    token_account_state: bool = False
    lamports: tuple[tuple[str, int], ...] = ()  # ("eq" | "ne" | "lt" | "gt", value)
    nonempty_txn_signature: bool | None = None

    def matches(self, info: geyser_pb2.SubscribeUpdateAccountInfo) -> bool:
        if self.accounts and info.pubkey not in self.accounts:
            return False
        if self.owners and info.owner not in self.owners:
            return False
        if self.nonempty_txn_signature is not None and self.nonempty_txn_signature != info.HasField("txn_signature"):
            return False
        data = info.data
        if self.datasize is not None and len(data) != self.datasize:
            return False
        if self.token_account_state and not is_token_account(data):
            return False
        if self.lamports and not all(_compare(op, info.lamports, value) for op, value in self.lamports):
            return False
        return all(data[offset : offset + len(wanted)] == wanted for offset, wanted in self.memcmp)

    def to_proto(self) -> geyser_pb2.SubscribeRequestFilterAccounts:
        out = geyser_pb2.SubscribeRequestFilterAccounts(
            account=sorted(b58encode(k) for k in self.accounts), owner=sorted(b58encode(k) for k in self.owners)
        )
        for offset, wanted in self.memcmp:
            out.filters.add().memcmp.CopyFrom(
                geyser_pb2.SubscribeRequestFilterAccountsFilterMemcmp(offset=offset, bytes=wanted)
            )
        if self.datasize is not None:
            out.filters.add().datasize = self.datasize
        if self.token_account_state:
            out.filters.add().token_account_state = True
        for op, value in self.lamports:
            setattr(out.filters.add().lamports, op, value)
        if self.nonempty_txn_signature is not None:
            out.nonempty_txn_signature = self.nonempty_txn_signature
        return out


def _compare(op: str, lamports: int, value: int) -> bool:
    if op == "eq":
        return lamports == value
    if op == "ne":
        return lamports != value
    if op == "lt":
        return lamports < value
    return lamports > value


def is_token_account(data: bytes) -> bool:
    """SPL Token's (or Token-2022's) test of an initialized token account's data."""
    size = len(data)
    if size < _TOKEN_ACCOUNT_LEN or size == _MULTISIG_LEN:
        return False
    if size > _TOKEN_ACCOUNT_LEN and data[_TOKEN_ACCOUNT_LEN] != 2:
        return False
    return data[_TOKEN_STATE_OFFSET] != 0


@dataclass(frozen=True, slots=True)
class TransactionFilter:
    vote: bool | None = None
    failed: bool | None = None
    signature: bytes | None = None
    include: frozenset[bytes] = frozenset()
    exclude: frozenset[bytes] = frozenset()
    required: frozenset[bytes] = frozenset()

    def matches(self, tx: TxView) -> bool:
        if self.vote is not None and self.vote != tx.is_vote:
            return False
        if self.failed is not None and self.failed != tx.failed:
            return False
        if self.signature is not None and self.signature != tx.signature:
            return False
        keys = tx.keys
        if self.include and self.include.isdisjoint(keys):
            return False
        if self.exclude and not self.exclude.isdisjoint(keys):
            return False
        return not self.required or self.required <= keys

    def to_proto(self) -> geyser_pb2.SubscribeRequestFilterTransactions:
        out = geyser_pb2.SubscribeRequestFilterTransactions(
            account_include=sorted(b58encode(k) for k in self.include),
            account_exclude=sorted(b58encode(k) for k in self.exclude),
            account_required=sorted(b58encode(k) for k in self.required),
        )
        if self.vote is not None:
            out.vote = self.vote
        if self.failed is not None:
            out.failed = self.failed
        if self.signature is not None:
            out.signature = b58encode(self.signature)
        return out


@dataclass(frozen=True, slots=True)
class SlotFilter:
    filter_by_commitment: bool = False
    interslot_updates: bool = False

    def matches(self, status: int, commitment: int) -> bool:
        if self.filter_by_commitment and status != commitment:
            return False
        return self.interslot_updates or status in MAIN_STATUSES


@dataclass(frozen=True)
class Filters:
    """One stream's filters, as its last `SubscribeRequest` set them (each map as (name, filter) pairs)."""

    accounts: tuple[tuple[str, AccountFilter], ...] = ()
    slots: tuple[tuple[str, SlotFilter], ...] = ()
    transactions: tuple[tuple[str, TransactionFilter], ...] = ()
    transactions_status: tuple[tuple[str, TransactionFilter], ...] = ()
    blocks_meta: tuple[str, ...] = ()
    commitment: int = PROCESSED
    data_slices: tuple[tuple[int, int], ...] = ()
    from_slot: int | None = None  # a replay the request asked for, not a filter: the server takes it off

    @property
    def empty(self) -> bool:
        return not (self.accounts or self.slots or self.transactions or self.transactions_status or self.blocks_meta)

    def slice(self, data: bytes) -> bytes:
        """Account data as the stream asked for it: the slices concatenated, or all of it."""
        if not self.data_slices:
            return data
        return b"".join(data[offset : offset + length] for offset, length in self.data_slices)


EMPTY = Filters()


def compile_request(request: geyser_pb2.SubscribeRequest, limits: FilterLimits = DEFAULT_LIMITS) -> Filters:
    """The filters a request sets (it replaces all of a stream's filters), or :class:`FilterError`."""
    _bound(request, limits)
    _refuse_unsupported(request, limits)
    commitment = request.commitment if request.HasField("commitment") else PROCESSED
    if commitment not in COMMITMENTS:
        raise FilterError(f"failed to create CommitmentLevel from {commitment}")
    return Filters(
        accounts=tuple((name, _account_filter(f, limits)) for name, f in _named(request.accounts, "accounts", limits)),
        slots=tuple(
            (name, SlotFilter(f.filter_by_commitment, f.interslot_updates))
            for name, f in _named(request.slots, "slots", limits)
        ),
        transactions=tuple(
            (name, _transaction_filter(f, limits)) for name, f in _named(request.transactions, "transactions", limits)
        ),
        transactions_status=tuple(
            (name, _transaction_filter(f, limits))
            for name, f in _named(request.transactions_status, "transactions_status", limits)
        ),
        blocks_meta=tuple(name for name, _ in _named(request.blocks_meta, "blocks_meta", limits)),
        commitment=commitment,
        data_slices=_data_slices(request.accounts_data_slice, limits),
        from_slot=request.from_slot if request.HasField("from_slot") else None,
    )


def _bound(request: geyser_pb2.SubscribeRequest, limits: FilterLimits) -> None:
    """Refuse a request past its size limits before any of it is decoded or compiled."""
    size = request.ByteSize()
    if size > limits.max_request_bytes:
        raise FilterError(f"request too large: {size} bytes (max {limits.max_request_bytes})")
    keys = sum(len(f.account) + len(f.owner) for f in request.accounts.values())
    for tf in [*request.transactions.values(), *request.transactions_status.values()]:
        keys += len(tf.account_include) + len(tf.account_exclude) + len(tf.account_required)
    if keys > limits.max_request_keys:
        raise FilterError(f"too many keys in the request: {keys} (max {limits.max_request_keys} in all filters)")


def _refuse_unsupported(request: geyser_pb2.SubscribeRequest, limits: FilterLimits) -> None:
    for kind in ("blocks", "entry", "block_footer"):
        if len(getattr(request, kind)):
            raise Unsupported(f"`{kind}` filters are not supported by this server")
    if request.HasField("from_slot") and not limits.from_slot:
        raise Unsupported("`from_slot` replay is not supported by this server")
    for f in request.accounts.values():
        if f.HasField("cuckoo_accounts_filter"):
            raise Unsupported("cuckoo account filters are not supported by this server")
    for tf in [*request.transactions.values(), *request.transactions_status.values()]:
        if tf.HasField("cuckoo_account_include"):
            raise Unsupported("cuckoo account filters are not supported by this server")
        if tf.HasField("token_accounts"):
            raise Unsupported("`token_accounts` expansion is not supported by this server")


def _named(filters: Mapping[str, Any], kind: str, limits: FilterLimits) -> list[tuple[str, Any]]:
    if len(filters) > limits.max_filters:
        raise FilterError(f"too many `{kind}` filters: {len(filters)} (max {limits.max_filters})")
    for name in filters:
        if not name or len(name) > limits.max_name_length:
            raise FilterError(f"filter name {name[:40]!r} must be 1 to {limits.max_name_length} characters")
    return sorted(filters.items())


def _keys(values: Iterable[str], what: str, limits: FilterLimits) -> frozenset[bytes]:
    listed = list(values)
    if len(listed) > limits.max_keys:
        raise FilterError(f"too many keys in `{what}`: {len(listed)} (max {limits.max_keys})")
    return frozenset(pubkey(value, what) for value in listed)


def _account_filter(f: geyser_pb2.SubscribeRequestFilterAccounts, limits: FilterLimits) -> AccountFilter:
    if len(f.filters) > limits.max_account_filters:
        raise FilterError(f"too many account data filters: {len(f.filters)} (max {limits.max_account_filters})")
    memcmp: list[tuple[int, bytes]] = []
    datasize: int | None = None
    token_state = False
    lamports: list[tuple[str, int]] = []
    for entry in f.filters:
        kind = entry.WhichOneof("filter")
        if kind == "memcmp":
            memcmp.append((entry.memcmp.offset, _memcmp_bytes(entry.memcmp, limits)))
        elif kind == "datasize":
            if datasize is not None:
                raise FilterError("datasize used more than once")
            datasize = entry.datasize
        elif kind == "token_account_state":
            if not entry.token_account_state:
                raise FilterError("token_account_state only allowed to be true")
            token_state = True
        elif kind == "lamports":
            op = entry.lamports.WhichOneof("cmp")
            if op is None:
                raise FilterError("cmp for lamports should be defined")
            lamports.append((op, getattr(entry.lamports, op)))
        else:
            raise FilterError("filter should be defined")
    return AccountFilter(
        accounts=_keys(f.account, "account", limits),
        owners=_keys(f.owner, "owner", limits),
        memcmp=tuple(memcmp),
        datasize=datasize,
        token_account_state=token_state,
        lamports=tuple(lamports),
        nonempty_txn_signature=f.nonempty_txn_signature if f.HasField("nonempty_txn_signature") else None,
    )


def _memcmp_bytes(memcmp: geyser_pb2.SubscribeRequestFilterAccountsFilterMemcmp, limits: FilterLimits) -> bytes:
    kind = memcmp.WhichOneof("data")
    most = limits.max_memcmp_bytes
    longest = {"base58": base58_chars(most), "base64": 4 * math.ceil(most / 3)}
    if kind in longest and len(text := getattr(memcmp, kind)) > longest[kind]:
        raise FilterError(f"memcmp data too large: {len(text)} {kind} characters (max {most} bytes)")
    try:
        if kind == "bytes":
            data = memcmp.bytes
        elif kind == "base58":
            data = b58decode(memcmp.base58)
        elif kind == "base64":
            data = base64.b64decode(memcmp.base64, validate=True)
        else:
            raise FilterError("data for memcmp should be defined")
    except (ValueError, binascii.Error) as exc:
        if isinstance(exc, FilterError):
            raise
        raise FilterError(f"invalid {kind} in memcmp") from exc
    if len(data) > limits.max_memcmp_bytes:
        raise FilterError(f"memcmp data too large: {len(data)} bytes (max {limits.max_memcmp_bytes})")
    return data


def _transaction_filter(f: geyser_pb2.SubscribeRequestFilterTransactions, limits: FilterLimits) -> TransactionFilter:
    return TransactionFilter(
        vote=f.vote if f.HasField("vote") else None,
        failed=f.failed if f.HasField("failed") else None,
        signature=signature(f.signature) if f.HasField("signature") else None,
        include=_keys(f.account_include, "account_include", limits),
        exclude=_keys(f.account_exclude, "account_exclude", limits),
        required=_keys(f.account_required, "account_required", limits),
    )


def _data_slices(
    slices: Iterable[geyser_pb2.SubscribeRequestAccountsDataSlice], limits: FilterLimits
) -> tuple[tuple[int, int], ...]:
    out = tuple((s.offset, s.length) for s in slices)
    if len(out) > limits.max_data_slices:
        raise FilterError(f"too many data slices: {len(out)} (max {limits.max_data_slices})")
    for (offset, length), (next_offset, _) in itertools.pairwise(out):
        if next_offset < offset:
            raise FilterError("data slices out of order")
        if offset + length > next_offset:
            raise FilterError("data slices overlapped")
    return out

"""Signals: launch-platform events read off confirmed blocks, their filters and their query. Pure.

The classifier (:mod:`gateway.signals.classifier`) hands each transaction of a ``getBlock`` answer
(``json`` encoding, full details, ``maxSupportedTransactionVersion: 0``) to :func:`classify` with the
:class:`SignalRules` of the deployment. The events are read from the transaction itself
(:mod:`gateway.signals.tx_events`: ``emit_cpi!`` self-CPIs first, ``Program data:`` logs as well), never
from account state, so a signal says what the transaction did and nothing later. The rules:

- A failed transaction (``meta.err`` not null) emits nothing.
- ``newPair``: each pump ``CreateEvent``. ``curve_type`` is ``classic`` when the pump instruction that
  emitted it is ``create``, ``v2`` when it is ``create_v2`` (by its discriminator); when that
  instruction is unknown (only logs, out of line), from the event: a Token-2022 mint is ``v2``, an
  SPL Token mint with the default quote mint ``classic``, anything else null. ``quote_asset`` is
  ``SOL`` for classic, the quote mint for v2, where the default quote mint (wrapped SOL passed as the
  quote, or none: a SOL curve) is the wrapped-native mint ``So111…112``. ``complete`` false: the
  curve was created at this slot. Also each PumpSwap ``CreatePoolEvent`` that is not part of a pump
  ``migrate`` (not run under one, and no migration of the same mint in the transaction): ``mint`` the
  pool's base mint, ``quote_asset`` its quote mint, ``curve_type`` and ``complete`` null.
- ``graduation``: each pump ``CompletePumpAmmMigrationEvent`` (the end of ``migrate``: the curve's
  liquidity moved to a PumpSwap pool). ``complete`` true, ``quote_asset`` the pool's quote mint
  (wrapped SOL for the default), ``sol_amount`` the lamports moved for a SOL curve.
- ``largeSwap``: each pump ``TradeEvent`` of a SOL curve (quote mint default or wrapped SOL) whose
  ``sol_amount`` is at least ``large_swap_lamports``. ``side`` buy or sell, ``quote_asset`` ``SOL``,
  ``complete`` whether this trade completed the curve (a ``CompleteEvent`` of the mint in the same
  transaction). Trades of other quotes have no SOL size and are never large swaps.
- ``walletActivity``: one per transaction signed by a watched wallet that invokes a watched program
  (top-level or by CPI). ``program`` is the first watched program invoked; with a trade by one of its
  watched signers: that trade's ``mint``, ``side``, ``sol_amount`` (SOL curves) and quote; else with a
  create: the new ``mint``; ``accounts`` the watched signers, then the mint.

``program`` is the program that emitted the event; ``accounts`` the accounts the event names (mint,
bonding curve or pool, user, creator), each once. Events are decoded for pump and PumpSwap only (other
watched programs count for ``walletActivity``); PumpSwap swaps are not decoded (no largeSwap from
pools yet). A field that cannot be established is null.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final, Literal

from solders.pubkey import Pubkey

from gateway.signals.tx_events import (
    EmittedEvent,
    Instruction,
    account_keys,
    ancestors,
    emitted_events,
    instructions,
    signers,
)
from pumpfun import pda
from pumpfun.events import CompleteEvent, CompletePumpAmmMigrationEvent, CreateEvent, CreatePoolEvent, TradeEvent
from pumpfun.ids import PUMP_AMM_PROGRAM_ID, PUMP_PROGRAM_ID, TOKEN_2022_PROGRAM_ID, TOKEN_PROGRAM_ID, WSOL_MINT
from pumpfun.instructions import CREATE_DISCRIMINATOR, CREATE_V2_DISCRIMINATOR, MIGRATE_DISCRIMINATOR

Kind = Literal["newPair", "graduation", "largeSwap", "walletActivity"]
KINDS: Final[tuple[Kind, ...]] = ("newPair", "graduation", "largeSwap", "walletActivity")
CurveType = Literal["classic", "v2"]
Side = Literal["buy", "sell"]

PUMP: Final = str(PUMP_PROGRAM_ID)
PUMP_AMM: Final = str(PUMP_AMM_PROGRAM_ID)
WSOL: Final = str(WSOL_MINT)
#: The programs watched by default: pump.fun's bonding curves (classic and v2 alike) and PumpSwap.
DEFAULT_SIGNAL_PROGRAMS: Final[tuple[str, ...]] = (PUMP, PUMP_AMM)
#: The programs whose events are decoded.
DECODED_PROGRAMS: Final = frozenset({PUMP, PUMP_AMM})
DEFAULT_LARGE_SWAP_LAMPORTS: Final = 10 * 10**9
MAX_FILTER_PROGRAMS: Final = 16
FILTER_FIELDS: Final = ("kinds", "mint", "programs")

_DEFAULT_KEY = Pubkey.default()
_SOL_QUOTES = frozenset({_DEFAULT_KEY, WSOL_MINT})


@dataclass(frozen=True, slots=True)
class SignalEvent:
    """One signal: docs/api.md's SignalEvent fields, plus ``block_time`` (unix seconds), ``sol_amount``
    (a trade's or a migration's size in lamports) and ``side`` (``buy``/``sell``), chosen here."""

    kind: Kind
    program: str
    signature: str
    slot: int
    mint: str | None = None
    accounts: tuple[str, ...] = ()
    quote_asset: str | None = None
    curve_type: CurveType | None = None
    complete: bool | None = None
    block_time: int | None = None
    sol_amount: int | None = None
    side: Side | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "program": self.program,
            "signature": self.signature,
            "slot": self.slot,
            "mint": self.mint,
            "accounts": list(self.accounts),
            "quote_asset": self.quote_asset,
            "curve_type": self.curve_type,
            "complete": self.complete,
            "block_time": self.block_time,
            "sol_amount": self.sol_amount,
            "side": self.side,
        }


@dataclass(frozen=True, slots=True)
class SignalRules:
    """What the classifier watches: ``programs`` (base58 ids), the largeSwap threshold, ``wallets``."""

    programs: frozenset[str] = frozenset(DEFAULT_SIGNAL_PROGRAMS)
    large_swap_lamports: int = DEFAULT_LARGE_SWAP_LAMPORTS
    wallets: frozenset[str] = field(default_factory=frozenset)


def is_pubkey(text: Any) -> bool:
    """A base58 public key of 32 bytes."""
    if not isinstance(text, str) or not 32 <= len(text) <= 44:
        return False
    try:
        Pubkey.from_string(text)
    except ValueError:
        return False
    return True


# ------------------------------------------------------------------------------------------ filters


@dataclass(frozen=True, slots=True)
class SignalFilter:
    """The filter of a ``subscribeSignal``: each field left out (None) matches everything; the fields
    combine with AND."""

    kinds: frozenset[str] | None = None
    mint: str | None = None
    programs: frozenset[str] | None = None

    @classmethod
    def parse(cls, params: Any) -> SignalFilter:
        """From ``subscribeSignal``'s params: ``[{kinds?, mint?, programs?}]``, ``[]`` or absent (all).
        Raises ``ValueError`` with a message for the caller."""
        if params is None:
            return cls()
        if not isinstance(params, list) or len(params) > 1:
            raise ValueError("params must be an array of at most one filter object: [{kinds?, mint?, programs?}]")
        spec = params[0] if params else None
        if spec is None:
            return cls()
        if not isinstance(spec, dict):
            raise ValueError("the filter must be an object: {kinds?, mint?, programs?}")
        unknown = sorted(set(spec) - set(FILTER_FIELDS))
        if unknown:
            raise ValueError(f"unknown filter field {unknown[0]!r}; known fields: {', '.join(FILTER_FIELDS)}")
        return cls(_kinds(spec.get("kinds")), _mint(spec.get("mint")), _programs(spec.get("programs")))

    def matches(self, event: SignalEvent | Mapping[str, Any]) -> bool:
        doc = event.to_json() if isinstance(event, SignalEvent) else event
        if self.kinds is not None and doc.get("kind") not in self.kinds:
            return False
        if self.mint is not None and doc.get("mint") != self.mint:
            return False
        return self.programs is None or doc.get("program") in self.programs


def _kinds(value: Any) -> frozenset[str] | None:
    if value is None:
        return None
    if not isinstance(value, list) or not value or not all(isinstance(k, str) for k in value):
        raise ValueError("kinds must be a non-empty array of signal kinds (leave it out for every kind)")
    for kind in value:
        if kind not in KINDS:
            raise ValueError(f"unknown signal kind {kind!r}; known kinds: {', '.join(KINDS)}")
    return frozenset(value)


def _mint(value: Any) -> str | None:
    if value is None:
        return None
    if not is_pubkey(value):
        raise ValueError("mint must be a base58 public key")
    return str(value)


def _programs(value: Any) -> frozenset[str] | None:
    if value is None:
        return None
    if not isinstance(value, list) or not 1 <= len(value) <= MAX_FILTER_PROGRAMS:
        raise ValueError(f"programs must be an array of 1 to {MAX_FILTER_PROGRAMS} base58 program ids")
    for program in value:
        if not is_pubkey(program):
            raise ValueError(f"programs: {program!r} is not a base58 public key")
    return frozenset(value)


# ---------------------------------------------------------------------------------- classification


def classify_block(block: Mapping[str, Any], slot: int, rules: SignalRules) -> list[SignalEvent]:
    """Every signal of one ``getBlock`` answer, in block order."""
    block_time = block.get("blockTime")
    when = block_time if isinstance(block_time, int) else None
    out: list[SignalEvent] = []
    for tx in block.get("transactions") or []:
        if isinstance(tx, dict):
            out += classify(tx, slot, when, rules)
    return out


def classify(tx: Mapping[str, Any], slot: int, block_time: int | None, rules: SignalRules) -> list[SignalEvent]:
    """The signals of one transaction of a block (rules in the module docstring)."""
    meta = tx.get("meta")
    if not isinstance(meta, dict) or meta.get("err") is not None:
        return []
    body = tx.get("transaction")
    signatures = body.get("signatures") if isinstance(body, dict) else None
    if not isinstance(signatures, list) or not signatures or not isinstance(signatures[0], str):
        return []
    if rules.programs.isdisjoint(account_keys(tx)):  # most of a mainnet block: nothing to walk
        return []
    ixs = instructions(tx)
    if not any(ix.program in rules.programs for ix in ixs):
        return []
    ctx = _Context(signatures[0], slot, block_time, ixs, emitted_events(tx, ixs, rules.programs & DECODED_PROGRAMS))
    out = [signal for e in ctx.emitted if (signal := _signal(ctx, e, rules)) is not None]
    activity = _wallet_activity(ctx, signers(tx), rules)
    if activity is not None:
        out.append(activity)
    return out


@dataclass(frozen=True, slots=True)
class _Context:
    signature: str
    slot: int
    block_time: int | None
    ixs: list[Instruction]
    emitted: list[EmittedEvent]

    def event(self, kind: Kind, program: str, **fields: Any) -> SignalEvent:
        return SignalEvent(kind, program, self.signature, self.slot, block_time=self.block_time, **fields)

    def migrated(self, mint: Pubkey) -> bool:
        return any(isinstance(e.event, CompletePumpAmmMigrationEvent) and e.event.mint == mint for e in self.emitted)

    def completed(self, mint: Pubkey) -> bool:
        return any(isinstance(e.event, CompleteEvent) and e.event.mint == mint for e in self.emitted)


def _signal(ctx: _Context, e: EmittedEvent, rules: SignalRules) -> SignalEvent | None:
    event = e.event
    if isinstance(event, CreateEvent) and e.program == PUMP:
        curve_type = _curve_type(e.emitter, event)
        return ctx.event(
            "newPair",
            e.program,
            mint=str(event.mint),
            accounts=_unique(event.mint, event.bonding_curve, event.user, event.creator),
            quote_asset=_new_curve_quote(curve_type, event.quote_mint),
            curve_type=curve_type,
            complete=False,
        )
    if isinstance(event, CreatePoolEvent) and e.program == PUMP_AMM:
        if _under_migrate(ctx, e) or ctx.migrated(event.base_mint):
            return None
        return ctx.event(
            "newPair",
            e.program,
            mint=str(event.base_mint),
            accounts=_unique(event.pool, event.base_mint, event.quote_mint, event.creator, event.lp_mint),
            quote_asset=str(event.quote_mint),
        )
    if isinstance(event, CompletePumpAmmMigrationEvent) and e.program == PUMP:
        sol_quoted = event.quote_mint in _SOL_QUOTES
        return ctx.event(
            "graduation",
            e.program,
            mint=str(event.mint),
            accounts=_unique(event.mint, event.bonding_curve, event.pool, event.user),
            quote_asset=WSOL if event.quote_mint == _DEFAULT_KEY else str(event.quote_mint),
            complete=True,
            sol_amount=event.sol_amount if sol_quoted else None,
        )
    if isinstance(event, TradeEvent) and e.program == PUMP and _is_large(event, rules):
        return ctx.event("largeSwap", e.program, **_trade_fields(ctx, event))
    return None


def _is_large(trade: TradeEvent, rules: SignalRules) -> bool:
    return trade.quote_mint in _SOL_QUOTES and trade.sol_amount >= rules.large_swap_lamports


def _curve_type(emitter: Instruction | None, event: CreateEvent) -> CurveType | None:
    discriminator = emitter.raw()[:8] if emitter is not None else b""
    if discriminator == CREATE_DISCRIMINATOR:
        return "classic"
    if discriminator == CREATE_V2_DISCRIMINATOR:
        return "v2"
    if emitter is None and event.token_program == TOKEN_2022_PROGRAM_ID:
        return "v2"
    if emitter is None and event.token_program == TOKEN_PROGRAM_ID and event.quote_mint == _DEFAULT_KEY:
        return "classic"
    return None


def _new_curve_quote(curve_type: CurveType | None, quote_mint: Pubkey) -> str | None:
    if curve_type == "classic":
        return "SOL"
    if curve_type == "v2":
        return WSOL if quote_mint == _DEFAULT_KEY else str(quote_mint)
    return None


def _under_migrate(ctx: _Context, e: EmittedEvent) -> bool:
    if e.emitter is None:
        return False
    return any(a.program == PUMP and a.raw()[:8] == MIGRATE_DISCRIMINATOR for a in ancestors(ctx.ixs, e.emitter))


def _trade_fields(ctx: _Context, trade: TradeEvent) -> dict[str, Any]:
    sol_quoted = trade.quote_mint in _SOL_QUOTES
    return {
        "mint": str(trade.mint),
        "accounts": _unique(trade.mint, pda.bonding_curve_pda(trade.mint), trade.user),
        "quote_asset": "SOL" if sol_quoted else str(trade.quote_mint),
        "complete": ctx.completed(trade.mint),
        "sol_amount": trade.sol_amount if sol_quoted else None,
        "side": "buy" if trade.is_buy else "sell",
    }


def _wallet_activity(ctx: _Context, signed_by: Sequence[str], rules: SignalRules) -> SignalEvent | None:
    watched = [s for s in signed_by if s in rules.wallets]
    if not watched:
        return None
    program = next((ix.program for ix in ctx.ixs if ix.program in rules.programs), None)
    if program is None:
        return None
    trade = next(
        (e.event for e in ctx.emitted if isinstance(e.event, TradeEvent) and str(e.event.user) in watched), None
    )
    if trade is not None:
        fields = _trade_fields(ctx, trade)
        fields["accounts"] = tuple(dict.fromkeys([*watched, fields["mint"]]))
        fields["complete"] = None
        return ctx.event("walletActivity", program, **fields)
    create = next((e for e in ctx.emitted if isinstance(e.event, CreateEvent)), None)
    if create is not None and isinstance(create.event, CreateEvent):
        mint = str(create.event.mint)
        curve_type = _curve_type(create.emitter, create.event)
        return ctx.event(
            "walletActivity",
            program,
            mint=mint,
            accounts=tuple(dict.fromkeys([*watched, mint])),
            quote_asset=_new_curve_quote(curve_type, create.event.quote_mint),
            curve_type=curve_type,
        )
    return ctx.event("walletActivity", program, accounts=tuple(watched))


def _unique(*keys: Pubkey) -> tuple[str, ...]:
    return tuple(dict.fromkeys(str(k) for k in keys))


# ---------------------------------------------------------------------------------- /signals/recent

DEFAULT_RECENT_LIMIT: Final = 100
MAX_RECENT_LIMIT: Final = 1000
RECENT_PARAMS: Final = ("limit", "kind", "since_slot", "before")
_U64 = 2**64
_EVENT_ID = re.compile(r"^([0-9]{1,20})-([0-9]{1,20})$")


def event_id(slot: int, n: int) -> str:
    """The id of the slot's ``n``-th event in the signal log: ``<slot>-<n>``, so ids order by slot."""
    return f"{slot}-{n}"


def parse_event_id(text: str) -> tuple[int, int] | None:
    match = _EVENT_ID.match(text)
    if match is None:
        return None
    slot, n = int(match.group(1)), int(match.group(2))
    return (slot, n) if slot < _U64 and n < _U64 else None


@dataclass(frozen=True, slots=True)
class RecentQuery:
    """``GET /signals/recent``'s query: newest first, at most ``limit``, of ``kind``, with a slot after
    ``since_slot`` and an id before ``before``."""

    limit: int = DEFAULT_RECENT_LIMIT
    kind: Kind | None = None
    since_slot: int | None = None
    before: str | None = None

    @classmethod
    def parse(cls, query: Mapping[str, str]) -> RecentQuery:
        """Raises ``ValueError`` with a message for the caller."""
        unknown = sorted(set(query) - set(RECENT_PARAMS))
        if unknown:
            raise ValueError(f"unknown query parameter {unknown[0]!r}; known: {', '.join(RECENT_PARAMS)}")
        limit = _int_param(query, "limit", 1, MAX_RECENT_LIMIT)
        since_slot = _int_param(query, "since_slot", 0, _U64 - 2)
        kind = query.get("kind")
        if kind is not None and kind not in KINDS:
            raise ValueError(f"unknown signal kind {kind!r}; known kinds: {', '.join(KINDS)}")
        before = query.get("before")
        if before is not None and parse_event_id(before) is None:
            raise ValueError("before must be an event id, <slot>-<n>")
        return cls(DEFAULT_RECENT_LIMIT if limit is None else limit, _as_kind(kind), since_slot, before)


def _as_kind(kind: str | None) -> Kind | None:
    return next((k for k in KINDS if k == kind), None)


def _int_param(query: Mapping[str, str], name: str, low: int, high: int) -> int | None:
    text = query.get(name)
    if text is None:
        return None
    if not text.isascii() or not text.isdigit() or len(text) > 20 or not low <= int(text) <= high:
        raise ValueError(f"{name} must be an integer from {low} to {high}")
    return int(text)

"""The Anchor events of one transaction, each with the instruction that emitted it. Pure.

A transaction of a ``getBlock`` (or ``getTransaction``) answer in ``json`` encoding is walked in
execution order: each top-level instruction followed by its inner instructions (CPIs), as the node
lists them. An Anchor program publishes an event two ways (:mod:`pumpfun.events`), and both are read:

- ``emit_cpi!``: a self-CPI whose data is ``EVENT_IX_TAG_LE + event``. The runtime only lets the
  program itself sign for its ``event_authority``, so such an instruction in a successful transaction
  is the program's own; the instruction that emitted it is its parent (the nearest earlier
  instruction one ``stackHeight`` up), or the top-level instruction when the node gives no heights.
- ``Program data: <base64>`` log lines, attributed to the program on top of the log's invoke stack.
  Every ``invoke [n]`` line is one instruction of the execution order, so the k-th invoke is the k-th
  instruction; when the programs do not line up (truncated logs, a node that logs differently) the
  event keeps its program but not its instruction.

A program that logs an event and also emits it by CPI would be counted twice: a log event whose bytes
equal a CPI event of the same program is dropped. Logs stop at ``Log truncated``; the CPI form cannot
be truncated, which is why it comes first.
"""

from __future__ import annotations

import base64
import binascii
import re
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import base58

from pumpfun.events import EVENT_IX_TAG_LE, Event, decode_event

_BASE58 = "[1-9A-HJ-NP-Za-km-z]{32,44}"
_INVOKE = re.compile(rf"^Program ({_BASE58}) invoke \[\d+\]$")
_RESULT = re.compile(rf"^Program ({_BASE58}) (success|failed)")
_PROGRAM_DATA = "Program data: "
_TRUNCATED = "Log truncated"


@dataclass(frozen=True, slots=True)
class Instruction:
    """One instruction of the execution order: top-level (``height`` 1) or inner."""

    index: int  # position in the execution order
    outer: int  # the top-level instruction it belongs to
    program: str
    accounts: tuple[str, ...]
    data: str  # base58, as the node gives it
    height: int | None  # the node's stackHeight; None when it gives none

    def raw(self) -> bytes:
        try:
            return base58.b58decode(self.data)
        except ValueError:
            return b""


@dataclass(frozen=True, slots=True)
class EmittedEvent:
    event: Event
    program: str  # the program that emitted it
    emitter: Instruction | None  # that program's instruction which emitted it, when known
    payload: bytes  # discriminator + Borsh: the event's bytes
    at: int  # where in the execution order it was emitted (for ordering)


def account_keys(tx: Mapping[str, Any]) -> list[str]:
    """Every account by index: the message's keys, then those loaded from lookup tables (writable, readonly)."""
    message = _dict(_dict(tx.get("transaction")).get("message"))
    keys = [str(k) for k in _list(message.get("accountKeys"))]
    loaded = _dict(_dict(tx.get("meta")).get("loadedAddresses"))
    return keys + [str(k) for k in _list(loaded.get("writable")) + _list(loaded.get("readonly"))]


def signers(tx: Mapping[str, Any]) -> list[str]:
    """The accounts that signed: the first ``header.numRequiredSignatures`` keys."""
    message = _dict(_dict(tx.get("transaction")).get("message"))
    count = _dict(message.get("header")).get("numRequiredSignatures")
    keys = [str(k) for k in _list(message.get("accountKeys"))]
    return keys[: count if isinstance(count, int) else 1]


def instructions(tx: Mapping[str, Any]) -> list[Instruction]:
    """All instructions in execution order: each top-level one, then its inner instructions."""
    keys = account_keys(tx)
    message = _dict(_dict(tx.get("transaction")).get("message"))
    inner: dict[int, list[Any]] = {}
    for group in _list(_dict(tx.get("meta")).get("innerInstructions")):
        group = _dict(group)
        if isinstance(group.get("index"), int):
            inner[group["index"]] = _list(group.get("instructions"))
    out: list[Instruction] = []
    for outer, ix in enumerate(_list(message.get("instructions"))):
        out.append(_instruction(_dict(ix), len(out), outer, keys, 1))
        for child in inner.get(outer, []):
            child = _dict(child)
            height = child.get("stackHeight")
            out.append(_instruction(child, len(out), outer, keys, height if isinstance(height, int) else None))
    return out


def _instruction(ix: dict[str, Any], index: int, outer: int, keys: list[str], height: int | None) -> Instruction:
    def key(i: Any) -> str:
        return keys[i] if isinstance(i, int) and 0 <= i < len(keys) else ""

    data = ix.get("data")
    accounts = tuple(key(i) for i in _list(ix.get("accounts")))
    return Instruction(
        index, outer, key(ix.get("programIdIndex")), accounts, data if isinstance(data, str) else "", height
    )


def ancestors(ixs: Sequence[Instruction], ix: Instruction) -> list[Instruction]:
    """The instructions that invoked ``ix``, nearest first, up to its top-level instruction."""
    if ix.height == 1:
        return []
    if ix.height is None:
        return [ixs[i] for i in range(ix.index - 1, -1, -1) if ixs[i].outer == ix.outer and ixs[i].height == 1][:1]
    out: list[Instruction] = []
    want = ix.height - 1
    for i in range(ix.index - 1, -1, -1):
        candidate = ixs[i]
        if candidate.outer != ix.outer:
            break
        if candidate.height == want:
            out.append(candidate)
            want -= 1
            if want == 0:
                break
    return out


def emitted_events(tx: Mapping[str, Any], ixs: Sequence[Instruction], programs: frozenset[str]) -> list[EmittedEvent]:
    """The events ``programs`` emitted in ``tx`` (whose :func:`instructions` are ``ixs``), in execution
    order; events that do not decode are left out."""
    found = _cpi_events(ixs, programs)
    seen = Counter((e.program, e.payload) for e in found)
    for event in _log_events(tx, ixs, programs):
        if seen[(event.program, event.payload)] > 0:
            seen[(event.program, event.payload)] -= 1  # the same event, emitted both ways
            continue
        found.append(event)
    return sorted(found, key=lambda e: e.at)  # stable: log events of an unknown instruction keep their order


def _cpi_events(ixs: Sequence[Instruction], programs: frozenset[str]) -> list[EmittedEvent]:
    out: list[EmittedEvent] = []
    for ix in ixs:
        if ix.program not in programs or ix.height == 1:
            continue
        data = ix.raw()
        if not data.startswith(EVENT_IX_TAG_LE):
            continue
        parents = ancestors(ixs, ix)
        emitter = parents[0] if parents and parents[0].program == ix.program else None
        event = _decode(data[len(EVENT_IX_TAG_LE) :])
        if event is not None:
            out.append(EmittedEvent(event, ix.program, emitter, data[len(EVENT_IX_TAG_LE) :], ix.index))
    return out


def _log_events(tx: Mapping[str, Any], ixs: Sequence[Instruction], programs: frozenset[str]) -> list[EmittedEvent]:
    out: list[EmittedEvent] = []
    stack: list[tuple[str, Instruction | None]] = []
    invoked = 0
    aligned = True  # the k-th invoke line is the k-th instruction, as far as the programs show
    for line in _list(_dict(tx.get("meta")).get("logMessages")):
        if not isinstance(line, str):
            continue
        if line.startswith(_TRUNCATED):
            break
        if line.startswith(_PROGRAM_DATA):
            if stack and stack[-1][0] in programs:
                payload = _b64(line[len(_PROGRAM_DATA) :])
                event = _decode(payload) if payload else None
                if event is not None and payload is not None:
                    emitter = stack[-1][1]
                    at = emitter.index if emitter is not None else len(ixs)  # unknown: after the others
                    out.append(EmittedEvent(event, stack[-1][0], emitter, payload, at))
            continue
        invoke = _INVOKE.match(line)
        if invoke is not None:
            program = invoke.group(1)
            ix = ixs[invoked] if invoked < len(ixs) else None
            aligned = aligned and ix is not None and ix.program == program
            stack.append((program, ix if aligned else None))
            invoked += 1
        elif _RESULT.match(line) and stack:
            stack.pop()
    return out


def _decode(payload: bytes) -> Event | None:
    try:
        return decode_event(payload)
    except ValueError:  # another event of the program (BorshError is a ValueError), or a layout we do not know
        return None


def _b64(text: str) -> bytes | None:
    try:
        return base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError):
        return None


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []

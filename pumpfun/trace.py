"""Render a described execution (a tree of program calls) the way a mainnet node reports it: log messages,
`innerInstructions` JSON and token-balance JSON.

A transaction's instructions are described as `Call`s whose `body` is an ordered mix of log lines the
program prints and the CPIs it makes. Nothing is executed; the numbers are what the description says.
A failed transaction ends in a `FailedCall` (its body may end in the failed CPI that caused it), rendered
with the runtime's `Program <id> failed: <error>` line in place of `success`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import base58
from solders.pubkey import Pubkey

from pumpfun.ids import COMPUTE_BUDGET_PROGRAM_ID, SYSTEM_PROGRAM_ID

__all__ = [
    "Call",
    "FailedCall",
    "RenderedTrace",
    "render_trace",
    "token_balance",
    "ui_amount_string",
]

#: Programs that the runtime reports without a "consumed" line.
_BUILTINS = frozenset({SYSTEM_PROGRAM_ID, COMPUTE_BUDGET_PROGRAM_ID})


@dataclass
class Call:
    """One program invocation: its accounts and data, and, in order, its log lines and its CPIs."""

    program: Pubkey
    accounts: list[Pubkey]
    data: bytes
    units: int = 0  # compute units spent by the program itself, excluding its CPIs
    body: list[str | Call] = field(default_factory=list)

    def log(self, line: str) -> Call:
        self.body.append(line)
        return self

    def cpi(self, call: Call) -> Call:
        self.body.append(call)
        return self


@dataclass
class FailedCall(Call):
    """An invocation that failed: the runtime prints `Program <id> failed: <error>` after its body (which holds what
    it logged and invoked before failing, possibly ending in the failed CPI that failed it)."""

    error: str = ""  # the runtime's text of the InstructionError, e.g. "custom program error: 0x1772"


@dataclass(frozen=True)
class RenderedTrace:
    log_messages: list[str]
    inner_instructions: list[dict[str, Any]]
    compute_units_consumed: int


def _b58(data: bytes) -> str:
    return str(base58.b58encode(data).decode())


def _render_call(call: Call, depth: int, budget: int, lines: list[str]) -> int:
    program = str(call.program)
    lines.append(f"Program {program} invoke [{depth}]")
    consumed = call.units
    for item in call.body:
        if isinstance(item, str):
            lines.append(item)
        else:
            consumed += _render_call(item, depth + 1, max(budget - consumed, 0), lines)
    if call.program not in _BUILTINS:
        lines.append(f"Program {program} consumed {consumed} of {budget} compute units")
    lines.append(
        f"Program {program} failed: {call.error}" if isinstance(call, FailedCall) else f"Program {program} success"
    )
    return consumed


def _flatten(call: Call, depth: int, index_of: dict[Pubkey, int], out: list[dict[str, Any]]) -> None:
    for item in call.body:
        if isinstance(item, Call):
            try:
                accounts = [index_of[a] for a in item.accounts]
                program_index = index_of[item.program]
            except KeyError as exc:
                raise ValueError(f"CPI account {exc.args[0]} is not among the transaction's account keys") from exc
            out.append(
                {
                    "programIdIndex": program_index,
                    "accounts": accounts,
                    "data": _b58(item.data),
                    "stackHeight": depth + 1,
                }
            )
            _flatten(item, depth + 1, index_of, out)


def render_trace(calls: Sequence[Call], account_keys: Sequence[Pubkey], compute_unit_limit: int) -> RenderedTrace:
    """Logs, inner instructions (indexes into `account_keys`) and total units of the top-level `calls`."""
    index_of = {key: i for i, key in enumerate(account_keys)}
    lines: list[str] = []
    inner: list[dict[str, Any]] = []
    total = 0
    for i, call in enumerate(calls):
        total += _render_call(call, 1, max(compute_unit_limit - total, 0), lines)
        flat: list[dict[str, Any]] = []
        _flatten(call, 1, index_of, flat)
        if flat:
            inner.append({"index": i, "instructions": flat})
    return RenderedTrace(lines, inner, total)


def ui_amount_string(amount: int, decimals: int) -> str:
    """`amount / 10**decimals` as a plain decimal string without trailing zeros, as RPC nodes print it."""
    whole, frac = divmod(amount, 10**decimals)
    frac_str = f"{frac:0{decimals}d}".rstrip("0") if decimals else ""
    return f"{whole}.{frac_str}" if frac_str else str(whole)


def token_balance(
    account_index: int, mint: Pubkey, owner: Pubkey, program_id: Pubkey, amount: int, decimals: int
) -> dict[str, Any]:
    """One entry of `preTokenBalances` / `postTokenBalances` in the mainnet JSON shape."""
    return {
        "accountIndex": account_index,
        "mint": str(mint),
        "owner": str(owner),
        "programId": str(program_id),
        "uiTokenAmount": {
            "amount": str(amount),
            "decimals": decimals,
            "uiAmount": amount / 10**decimals if amount else None,
            "uiAmountString": ui_amount_string(amount, decimals),
        },
    }

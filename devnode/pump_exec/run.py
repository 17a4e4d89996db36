"""One transaction, emulated whole: the fee first (as the runtime takes it before execution), then each instruction
in order on a scratch copy of the accounts, then the rent check; the logs and inner instructions rendered as a node
reports them. The outcome is an `Emulation`; the chain records it (or answers a simulation with it).

Mainnet's rules followed: a fee payer that does not exist or cannot pay the fee drops the transaction (nothing is
recorded, nothing charged); an instruction that fails fails the transaction at its index
(`{"InstructionError": [i, err]}`), which still pays its fee and changes nothing else; an account left with
lamports below its rent-exempt minimum fails the transaction (`InsufficientFundsForRent`) unless it was already
rent-paying at that size and did not grow; a transaction whose instructions need more compute units than its
limit fails at the instruction that exceeds it. The compute units are the typical figures the handlers give.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from solders.account import Account
from solders.pubkey import Pubkey
from solders.transaction import VersionedTransaction

from devnode.injected import InjectedTransaction
from devnode.parsing import compute_budget_price_and_limit
from devnode.pump_exec.ata import associated_token_account
from devnode.pump_exec.context import AccountLoader, Failed, Ix, Meta, Scratch, account_with
from devnode.pump_exec.errors import instruction_error_text, unsupported
from devnode.pump_exec.pump_v2 import pump_any
from devnode.pump_exec.system import compute_budget, system
from devnode.pump_exec.token import token
from pumpfun import spl
from pumpfun.ids import (
    ASSOCIATED_TOKEN_PROGRAM_ID,
    COMPUTE_BUDGET_PROGRAM_ID,
    PUMP_PROGRAM_ID,
    SYSTEM_PROGRAM_ID,
    TOKEN_2022_PROGRAM_ID,
    TOKEN_PROGRAM_ID,
)
from pumpfun.trace import Call, FailedCall, render_trace

__all__ = ["Emulation", "TxView", "emulate", "involves_pump"]

Handler = Callable[[Scratch, Ix, int], Call]

_HANDLERS: Final[dict[Pubkey, Handler]] = {
    COMPUTE_BUDGET_PROGRAM_ID: compute_budget,
    SYSTEM_PROGRAM_ID: system,
    ASSOCIATED_TOKEN_PROGRAM_ID: associated_token_account,
    TOKEN_PROGRAM_ID: token,
    TOKEN_2022_PROGRAM_ID: token,
    PUMP_PROGRAM_ID: pump_any,
}
#: Units a failed instruction reports when its handler gave none: builtins spend 150, programs a little.
_FAILED_UNITS: Final = {COMPUTE_BUDGET_PROGRAM_ID: 150, SYSTEM_PROGRAM_ID: 150}
_DEFAULT_FAILED_UNITS: Final = 2_000
#: The compute-unit limit without SetComputeUnitLimit, as `Ledger.fee_for_message` prices it.
_DEFAULT_UNITS_PER_INSTRUCTION: Final = 200_000
_MAX_UNITS: Final = 1_400_000


@dataclass(frozen=True)
class TxView:
    """A transaction's message with its account keys resolved (static, then loaded from lookup tables)."""

    keys: Sequence[Pubkey]
    writable: Sequence[bool]
    signer: Sequence[bool]
    instructions: Sequence[tuple[int, bytes, bytes]]  # (program id index, account indexes, data)

    def ixs(self) -> list[Ix]:
        return [
            Ix(
                i,
                self.keys[program],
                tuple(Meta(self.keys[a], self.signer[a], self.writable[a]) for a in accounts),
                data,
            )
            for i, (program, accounts, data) in enumerate(self.instructions)
        ]


@dataclass(frozen=True)
class Emulation:
    """What the transaction did. `landed` False: the fee could not be paid, nothing is recorded. `post` holds
    every account it changed as it is after (the fee payer's fee taken; None: closed); on failure only the fee
    payer."""

    payer: Pubkey
    err: Any
    fee: int
    landed: bool = True
    logs: list[str] = field(default_factory=list)
    inner_instructions: list[dict[str, Any]] = field(default_factory=list)
    units: int = 0
    post: list[tuple[Pubkey, Account | None]] = field(default_factory=list)

    def post_accounts(self) -> list[tuple[Pubkey, Account]]:
        """`post` as a simulation reports it (a closed account: no lamports, no data)."""
        return [(key, account or Account(0, b"", SYSTEM_PROGRAM_ID)) for key, account in self.post]

    def injected(self, tx: VersionedTransaction) -> InjectedTransaction:
        """For `Chain.inject`, which applies the writes and then takes the fee: the payer's fee is given back."""
        writes = []
        if self.err is None:
            for key, account in self.post_accounts():
                if key == self.payer:
                    account = account_with(account, lamports=account.lamports + self.fee)
                writes.append((key, account))
        return InjectedTransaction(
            transaction=tx,
            log_messages=self.logs,
            inner_instructions=self.inner_instructions,
            account_writes=writes,
            compute_units_consumed=self.units,
            fee=self.fee,
            err=self.err,
        )


def involves_pump(view: TxView) -> bool:
    """The transaction has a top-level pump instruction: the devnode emulates all of it."""
    return any(view.keys[program] == PUMP_PROGRAM_ID for program, _, _ in view.instructions)


def _rent_paying(account: Account | None) -> bool:
    return account is not None and account.lamports < spl.rent_exempt_minimum(len(bytes(account.data)))


def _rent_ok(before: Account | None, after: Account | None) -> bool:
    """Agave's rent-state rule: an account may end rent-paying only if it was, at the same size, and did not grow."""
    if not _rent_paying(after):
        return True
    assert after is not None
    return (
        before is not None
        and _rent_paying(before)
        and len(bytes(before.data)) == len(bytes(after.data))
        and after.lamports <= before.lamports
    )


def _rent_check(scratch: Scratch, keys: Sequence[Pubkey]) -> Any:
    for key, account in scratch.changes():
        if not scratch.rent_rule_waived(key) and not _rent_ok(scratch.original(key), account):
            return {"InsufficientFundsForRent": {"account_index": list(keys).index(key)}}
    return None


def _unit_limit(ixs: Sequence[Ix]) -> int:
    _, limit = compute_budget_price_and_limit([(ix.program, ix.data) for ix in ixs])
    if limit is None:
        limit = _DEFAULT_UNITS_PER_INSTRUCTION * len(ixs)
    return min(limit, _MAX_UNITS)


def _total_units(call: Call) -> int:
    return call.units + sum(_total_units(c) for c in call.body if isinstance(c, Call))


def _failed_call(ix: Ix, failure: Failed) -> FailedCall:
    if failure.call is not None:
        return failure.call
    units = failure.units if failure.units is not None else _FAILED_UNITS.get(ix.program, _DEFAULT_FAILED_UNITS)
    return FailedCall(ix.program, ix.keys, ix.data, units, list(failure.logs), instruction_error_text(failure.err))


def _execute(scratch: Scratch, ixs: Sequence[Ix], limit: int, now: int) -> tuple[list[Call], Any]:
    """Each instruction in order until one fails: the calls made, and the error (None: all succeeded)."""
    calls: list[Call] = []
    used = 0
    for ix in ixs:
        handler = _HANDLERS.get(ix.program)
        try:
            if handler is None:
                raise unsupported(f"an instruction of program {ix.program}")
            call = handler(scratch, ix, now)
        except Failed as failure:
            calls.append(_failed_call(ix, failure))
            return calls, {"InstructionError": [ix.index, failure.err]}
        if used + _total_units(call) > limit:
            text = instruction_error_text("ComputationalBudgetExceeded")
            calls.append(FailedCall(ix.program, ix.keys, ix.data, limit - used, [], text))
            return calls, {"InstructionError": [ix.index, "ComputationalBudgetExceeded"]}
        used += _total_units(call)
        calls.append(call)
    return calls, None


def emulate(view: TxView, load: AccountLoader, *, fee: int, now: int) -> Emulation:
    """Run the transaction `view` against the accounts `load` reads, charging `fee`, at block time `now`."""
    payer = view.keys[0]
    account = load(payer)
    if account is None or not account.lamports:
        return Emulation(payer, "AccountNotFound", fee, landed=False)
    if account.lamports < fee:
        return Emulation(payer, "InsufficientFundsForFee", fee, landed=False)
    charged = account_with(account, lamports=account.lamports - fee)
    if not _rent_ok(account, charged if charged.lamports else None):
        return Emulation(payer, {"InsufficientFundsForRent": {"account_index": 0}}, fee, landed=False)
    scratch = Scratch(load, [k for k, w in zip(view.keys, view.writable, strict=True) if w])
    scratch.set_lamports(payer, charged.lamports)
    ixs = view.ixs()
    limit = _unit_limit(ixs)
    calls, err = _execute(scratch, ixs, limit, now)
    if err is None:
        err = _rent_check(scratch, view.keys)
    trace = render_trace(calls, list(view.keys), limit)
    post = scratch.changes() if err is None else [(payer, charged if charged.lamports else None)]
    return Emulation(
        payer, err, fee, True, trace.log_messages, trace.inner_instructions, trace.compute_units_consumed, post
    )

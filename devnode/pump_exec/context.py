"""What one emulated transaction works on: its instructions with their accounts resolved, a scratch copy of the
accounts it touches, and the failure an instruction raises.

A transaction is atomic: its instructions change only the `Scratch`, and the chain takes the scratch's accounts
only when every instruction succeeded (a failed transaction changes nothing but its fee payer's lamports).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from solders.account import Account
from solders.instruction import AccountMeta, Instruction
from solders.pubkey import Pubkey

from pumpfun.ids import SYSTEM_PROGRAM_ID
from pumpfun.trace import FailedCall

__all__ = ["AccountLoader", "Failed", "Ix", "Meta", "Scratch", "account_with", "custom"]

#: Reads an account from the chain (None: no such account).
AccountLoader = Callable[[Pubkey], Account | None]


@dataclass(frozen=True)
class Meta:
    """One account of an instruction, with the privileges the message gives it."""

    pubkey: Pubkey
    signer: bool
    writable: bool


@dataclass(frozen=True)
class Ix:
    """A top-level instruction of the transaction, at position `index` of its message."""

    index: int
    program: Pubkey
    accounts: tuple[Meta, ...]
    data: bytes

    @property
    def keys(self) -> list[Pubkey]:
        return [m.pubkey for m in self.accounts]

    def instruction(self) -> Instruction:
        return Instruction(
            self.program, self.data, [AccountMeta(m.pubkey, m.signer, m.writable) for m in self.accounts]
        )


class Failed(Exception):
    """An instruction failed. `err` is the inner part of mainnet's `{"InstructionError": [index, err]}`
    (`{"Custom": n}` or a builtin name such as `"InvalidAccountData"`); `logs` are the lines the failing program
    printed before failing; `call`, when the handler rendered the failure itself (with the CPIs it made first),
    replaces the plain rendering of the instruction; `units` are what the program spent before failing (None:
    a typical figure for the program)."""

    def __init__(
        self, err: Any, logs: Sequence[str] = (), call: FailedCall | None = None, units: int | None = None
    ) -> None:
        super().__init__(f"{err}: {' / '.join(logs)}" if logs else str(err))
        self.err = err
        self.logs = list(logs)
        self.call = call
        self.units = units


def custom(code: int) -> dict[str, int]:
    """The `{"Custom": code}` of a program error."""
    return {"Custom": int(code)}


def account_with(account: Account, *, lamports: int | None = None, data: bytes | None = None) -> Account:
    """A copy of `account` with other lamports or data."""
    return Account(
        account.lamports if lamports is None else lamports,
        bytes(account.data) if data is None else data,
        account.owner,
        account.executable,
        account.rent_epoch,
    )


class Scratch:
    """The accounts of one transaction: read from the chain on first use, changed here only.

    A change to an account the message does not mark writable fails the instruction as the runtime does
    (`ReadonlyLamportChange` / `ReadonlyDataModified`). An account with no lamports does not exist.
    """

    def __init__(self, load: AccountLoader, writable: Iterable[Pubkey]) -> None:
        self._load = load
        self._writable = frozenset(writable)
        self._accounts: dict[Pubkey, Account | None] = {}
        self._original: dict[Pubkey, Account | None] = {}
        self._changed: dict[Pubkey, None] = {}
        self._rent_rule_waived: set[Pubkey] = set()

    def get(self, key: Pubkey) -> Account | None:
        if key not in self._accounts:
            account = self._load(key)
            self._accounts[key] = self._original[key] = account if account is not None and account.lamports else None
        return self._accounts[key]

    def original(self, key: Pubkey) -> Account | None:
        """The account as the transaction found it."""
        self.get(key)
        return self._original[key]

    def lamports(self, key: Pubkey) -> int:
        account = self.get(key)
        return account.lamports if account is not None else 0

    def is_writable(self, key: Pubkey) -> bool:
        return key in self._writable

    def put(self, key: Pubkey, account: Account | None) -> None:
        """Set `key`'s account (None or no lamports: the account is closed)."""
        before = self.get(key)
        if account is not None and not account.lamports:
            account = None
        if not self.is_writable(key):
            same_lamports = (before.lamports if before else 0) == (account.lamports if account else 0)
            raise Failed("ReadonlyDataModified" if same_lamports else "ReadonlyLamportChange")
        self._accounts[key] = account
        self._changed[key] = None

    def set_lamports(self, key: Pubkey, lamports: int) -> None:
        """Set the lamports of `key` (a new account is a system account with no data)."""
        before = self.get(key)
        if before is None:
            self.put(key, Account(lamports, b"", SYSTEM_PROGRAM_ID))
        else:
            self.put(key, account_with(before, lamports=lamports))

    def move_lamports(self, source: Pubkey, destination: Pubkey, lamports: int) -> None:
        """Move lamports between two accounts (the caller has checked that `source` holds them)."""
        if source == destination or not lamports:
            return
        self.set_lamports(source, self.lamports(source) - lamports)
        self.set_lamports(destination, self.lamports(destination) + lamports)

    def waive_rent_rule(self, *keys: Pubkey) -> None:
        """Let `keys` end below their rent-exempt minimum (see `devnode.pump_exec.pump` for which and why)."""
        self._rent_rule_waived.update(keys)

    def rent_rule_waived(self, key: Pubkey) -> bool:
        return key in self._rent_rule_waived

    def changes(self) -> list[tuple[Pubkey, Account | None]]:
        """Every account the transaction changed, as it is now (None: closed)."""
        return [(key, self._accounts[key]) for key in self._changed]

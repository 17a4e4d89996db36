"""The texts a node prints for a failed instruction: the runtime's `Program <id> failed: <text>` (Agave's Display of
`InstructionError`), and the SPL Token program's error codes with the line it logs for each.

Sources: agave `sdk/instruction/src/error.rs` (the Display strings) and solana-program-library
`token/program/src/error.rs` (TokenError codes and messages, the same in Token-2022 for these codes).
"""

from __future__ import annotations

from enum import IntEnum
from typing import Any, Final

from devnode.pump_exec.context import Failed, custom

__all__ = ["TokenError", "instruction_error_text", "token_failure", "unsupported"]

_BUILTIN_TEXT: Final[dict[str, str]] = {
    "GenericError": "generic instruction error",
    "InvalidArgument": "invalid program argument",
    "InvalidInstructionData": "invalid instruction data",
    "InvalidAccountData": "invalid account data for instruction",
    "InsufficientFunds": "insufficient funds for instruction",
    "IncorrectProgramId": "incorrect program id for instruction",
    "MissingRequiredSignature": "missing required signature for instruction",
    "UninitializedAccount": "instruction requires an initialized account",
    "NotEnoughAccountKeys": "insufficient account keys for instruction",
    "InvalidSeeds": "Provided seeds do not result in a valid address",
    "IllegalOwner": "Provided owner is not allowed",
    "ReadonlyLamportChange": "instruction changed the balance of a read-only account",
    "ReadonlyDataModified": "instruction modified data of a read-only account",
    "UnsupportedProgramId": "Unsupported program id",
    "ComputationalBudgetExceeded": "Computational budget exceeded",
}


def instruction_error_text(err: Any) -> str:
    """What the runtime prints after `failed: ` for the inner InstructionError `err`."""
    if isinstance(err, dict) and "Custom" in err:
        return f"custom program error: {int(err['Custom']):#x}"
    return _BUILTIN_TEXT.get(str(err), str(err))


class TokenError(IntEnum):
    """SPL Token's custom error codes that the emulated token instructions return."""

    InsufficientFunds = 1
    MintMismatch = 3
    OwnerMismatch = 4
    NonNativeHasBalance = 11
    AccountFrozen = 17
    MintDecimalsMismatch = 18
    NonNativeNotSupported = 19


_TOKEN_MESSAGES: Final[dict[TokenError, str]] = {
    TokenError.InsufficientFunds: "insufficient funds",
    TokenError.MintMismatch: "Account not associated with this Mint",
    TokenError.OwnerMismatch: "owner does not match",
    TokenError.NonNativeHasBalance: "Non-native account can only be closed if its balance is zero",
    TokenError.AccountFrozen: "Account is frozen",
    TokenError.MintDecimalsMismatch: "The provided decimals value different from the Mint decimals",
    TokenError.NonNativeNotSupported: "Instruction does not support non-native tokens",
}


def token_failure(error: TokenError) -> Failed:
    """A token program failure: `Program log: Error: <message>`, then `custom program error: <code>`."""
    return Failed(custom(error), [f"Program log: Error: {_TOKEN_MESSAGES[error]}"])


def unsupported(what: str) -> Failed:
    """An instruction the devnode cannot emulate next to a pump instruction: fails the transaction, saying so."""
    return Failed(
        "UnsupportedProgramId",
        [
            f"devnode: cannot emulate {what} in a transaction with a pump.fun instruction; emulated next to pump: "
            "ComputeBudget, System Transfer, Associated Token Account Create/CreateIdempotent, SPL Token / Token-2022 "
            "Transfer/TransferChecked/SyncNative/CloseAccount, pump buy/sell/buy_exact_sol_in/buy_v2/sell_v2/"
            "buy_exact_quote_in_v2"
        ],
    )

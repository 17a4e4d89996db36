"""The error codes a pump `buy` or `sell` fails with, as `{"InstructionError": [i, {"Custom": code}]}`.

Program errors (6000+) and their messages: the `errors` table of pump-fun/pump-public-docs `idl/pump.json`.
Framework errors (100-3999): Anchor's `ErrorCode`, raised while the accounts are checked, before the
program's own code runs. A client reading a failed trade maps the code back with `error_name`.
"""

from __future__ import annotations

from enum import IntEnum
from typing import Final

__all__ = ["AnchorError", "PumpError", "error_message", "error_name"]


class PumpError(IntEnum):
    """The pump program's own errors that a legacy buy or sell can return."""

    NotAuthorized = 6000
    TooMuchSolRequired = 6002
    TooLittleSolReceived = 6003
    MintDoesNotMatchBondingCurve = 6004
    BondingCurveComplete = 6005
    NotInitialized = 6007
    BuyZeroAmount = 6020
    NotEnoughTokensToBuy = 6021
    SellZeroAmount = 6022
    NotEnoughTokensToSell = 6023
    Overflow = 6024
    BuybackFeeRecipientNotAuthorized = 6057
    BuybackFeeRecipientMissing = 6062
    InvalidBondingCurveV2 = 6074


class AnchorError(IntEnum):
    """Anchor framework errors raised by the account checks of an instruction."""

    InstructionDidNotDeserialize = 102
    ConstraintMut = 2000
    ConstraintSeeds = 2006
    AccountDiscriminatorMismatch = 3002
    AccountNotEnoughKeys = 3005
    AccountOwnedByWrongProgram = 3007
    InvalidProgramId = 3008
    AccountNotSigner = 3010
    AccountNotInitialized = 3012


_MESSAGES: Final[dict[int, str]] = {
    PumpError.NotAuthorized: "The given account is not authorized to execute this instruction.",
    PumpError.TooMuchSolRequired: "slippage: Too much SOL required to buy the given amount of tokens.",
    PumpError.TooLittleSolReceived: "slippage: Too little SOL received to sell the given amount of tokens.",
    PumpError.MintDoesNotMatchBondingCurve: "The mint does not match the bonding curve.",
    PumpError.BondingCurveComplete: "The bonding curve has completed and liquidity migrated to raydium.",
    PumpError.NotInitialized: "The program is not initialized.",
    PumpError.BuyZeroAmount: "Buy zero amount",
    PumpError.NotEnoughTokensToBuy: "Not enough tokens to buy",
    PumpError.SellZeroAmount: "Sell zero amount",
    PumpError.NotEnoughTokensToSell: "Not enough tokens to sell",
    PumpError.Overflow: "Overflow",
    PumpError.BuybackFeeRecipientNotAuthorized: "Buyback fee recipient not authorized",
    PumpError.BuybackFeeRecipientMissing: "BuybackFeeRecipientMissing",
    PumpError.InvalidBondingCurveV2: "bonding_curve_v2 remaining account is missing or invalid",
    AnchorError.InstructionDidNotDeserialize: "The program could not deserialize the given instruction",
    AnchorError.ConstraintMut: "A mut constraint was violated",
    AnchorError.ConstraintSeeds: "A seeds constraint was violated",
    AnchorError.AccountDiscriminatorMismatch: "8 byte discriminator did not match what was expected",
    AnchorError.AccountNotEnoughKeys: "Not enough account keys given to the instruction",
    AnchorError.AccountOwnedByWrongProgram: "The given account is owned by a different program than expected",
    AnchorError.InvalidProgramId: "Program ID was not as expected",
    AnchorError.AccountNotSigner: "The given account did not sign",
    AnchorError.AccountNotInitialized: "The program expected this account to be already initialized",
}


def error_name(code: int) -> str | None:
    """The name of a pump or Anchor error code, or None for a code this table does not hold."""
    for table in (PumpError, AnchorError):
        try:
            return table(code).name
        except ValueError:
            continue
    return None


def error_message(code: int) -> str:
    """The message the program logs with the error (its IDL `msg`)."""
    return _MESSAGES.get(code, error_name(code) or f"custom program error: {code:#x}")

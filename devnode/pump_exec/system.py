"""The builtins a pump transaction uses: ComputeBudget (read by the runtime before execution; invoking it only
logs) and the System program's `Transfer`, with the System program's checks and log lines.

Source: agave `programs/system/src/system_processor.rs` (`transfer_verified`: the signer check, "Transfer: `from`
must not carry data", "Transfer: insufficient lamports {}, need {}" and `SystemError::ResultWithNegativeLamports`
= custom error 1) and `compute-budget-instruction` (the instruction layouts).
"""

from __future__ import annotations

import struct
from typing import Final

from solders.pubkey import Pubkey

from devnode.pump_exec.context import Failed, Ix, Scratch, custom
from devnode.pump_exec.errors import unsupported
from pumpfun.ids import COMPUTE_BUDGET_PROGRAM_ID, SYSTEM_PROGRAM_ID
from pumpfun.trace import Call

__all__ = ["compute_budget", "system", "transfer_lamports"]

#: ComputeBudget instruction tag -> its data length (RequestHeapFrame, SetComputeUnitLimit, SetComputeUnitPrice,
#: SetLoadedAccountsDataSizeLimit).
_COMPUTE_BUDGET_SIZES: Final = {1: 5, 2: 5, 3: 9, 4: 5}
_COMPUTE_BUDGET_UNITS: Final = 150
_SYSTEM_UNITS: Final = 150
_TRANSFER: Final = 2
#: `SystemError::ResultWithNegativeLamports`.
_NEGATIVE_LAMPORTS: Final = 1


def compute_budget(scratch: Scratch, ix: Ix, now: int) -> Call:
    """A ComputeBudget instruction: the runtime applied it before execution; here it is only checked and logged."""
    if not ix.data or _COMPUTE_BUDGET_SIZES.get(ix.data[0]) != len(ix.data):
        raise Failed("InvalidInstructionData")
    return Call(COMPUTE_BUDGET_PROGRAM_ID, ix.keys, ix.data, units=_COMPUTE_BUDGET_UNITS)


def transfer_lamports(scratch: Scratch, source: Pubkey, destination: Pubkey, lamports: int, *, signed: bool) -> None:
    """System `Transfer`'s checks and effect (shared by a top-level transfer and the CPIs a pump buy makes)."""
    if not signed:
        raise Failed("MissingRequiredSignature", [f"Transfer: `from` account {source} must sign"])
    account = scratch.get(source)
    if account is not None and (bytes(account.data) or account.owner != SYSTEM_PROGRAM_ID):
        raise Failed("InvalidArgument", ["Transfer: `from` must not carry data"])
    have = scratch.lamports(source)
    if lamports > have:
        raise Failed(custom(_NEGATIVE_LAMPORTS), [f"Transfer: insufficient lamports {have}, need {lamports}"])
    scratch.move_lamports(source, destination, lamports)


def system(scratch: Scratch, ix: Ix, now: int) -> Call:
    """A top-level System instruction: `Transfer` only."""
    if len(ix.data) < 4 or struct.unpack_from("<I", ix.data)[0] != _TRANSFER:
        raise unsupported("this System program instruction (only Transfer is emulated)")
    if len(ix.data) != 12:
        raise Failed("InvalidInstructionData")
    if len(ix.accounts) < 2:
        raise Failed("NotEnoughAccountKeys")
    source, destination = ix.accounts[0], ix.accounts[1]
    lamports = struct.unpack_from("<Q", ix.data, 4)[0]
    transfer_lamports(scratch, source.pubkey, destination.pubkey, lamports, signed=source.signer)
    return Call(SYSTEM_PROGRAM_ID, ix.keys, ix.data, units=_SYSTEM_UNITS)

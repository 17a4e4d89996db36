"""The contract between the chain and the launch-platform feed (devnode/feed/).

LiteSVM cannot run programs we do not have the bytecode of (pump.fun and friends), so the feed (and the
emulation of users' pump transactions, devnode/pump_exec/) computes their effects itself and hands the chain
an `InjectedTransaction`; `Chain.inject` records it exactly like an executed transaction (block, history,
indexes, PubSub notifications).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from solders.account import Account
from solders.pubkey import Pubkey
from solders.transaction import VersionedTransaction


@dataclass(frozen=True)
class InjectedTransaction:
    """A transaction of a program that LiteSVM cannot run (e.g. pump.fun), recorded as if it had landed.

    `account_writes` is the state after the transaction, applied with `set_account`, *before* the fee
    is debited from the fee payer: do not subtract the fee in the fee payer's written lamports.
    When both token balance lists are empty the chain computes them from the account states before
    and after (for every account key of the message that is an SPL Token / Token-2022 account).
    A transaction that failed (`err` in mainnet's JSON shape, e.g. `{"InstructionError": [3, {"Custom": 6002}]}`)
    writes nothing and pays only its fee, as on mainnet (the devnode's pump emulation records failed trades so).
    """

    transaction: VersionedTransaction  # really signed by its signers
    log_messages: list[str]
    # mainnet json shape: [{"index": i, "instructions": [{"programIdIndex": n, "accounts": [..],
    #                        "data": "<base58>", "stackHeight": 2}]}]
    inner_instructions: list[dict[str, Any]]
    account_writes: list[tuple[Pubkey, Account]]  # state after the tx; applied with set_account
    compute_units_consumed: int = 50_000
    fee: int = 5_000
    pre_token_balances: list[dict[str, Any]] = field(default_factory=list)
    post_token_balances: list[dict[str, Any]] = field(default_factory=list)
    err: Any = None  # None: succeeded

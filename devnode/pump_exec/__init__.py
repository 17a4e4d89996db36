"""Transactions with a pump.fun instruction, executed by the devnode itself.

LiteSVM cannot run the pump program (its bytecode is not public), so a transaction that holds a top-level pump
instruction is emulated whole, atomically, instead of being handed to LiteSVM: the chain checks its signatures,
blockhash and duplicates as for any transaction (`devnode.chain.transactions`), then `emulate` takes the fee and
applies each instruction in order to a scratch copy of the accounts it touches. What it runs:

* ComputeBudget (checked and logged; the fee is the chain's `fee_for_message`, the limit its compute budget);
* System `Transfer`;
* Associated Token Account `Create` / `CreateIdempotent` (SPL Token or Token-2022, wrapped SOL included);
* SPL Token / Token-2022 `Transfer`, `TransferChecked`, `SyncNative`, `CloseAccount`;
* pump `buy` and `sell` as `pumpfun.instructions.buy_instruction` / `sell_instruction` build them, with the
  program's checks and errors, priced by `pumpfun.curve` at the rates of the on-chain Global (`pumpfun.fees`);
* pump `buy_exact_sol_in`, `buy_v2`, `sell_v2` and `buy_exact_quote_in_v2` (`pumpfun.instructions_v2`), on SOL
  coins and on coins with a quote mint (wrapped SOL or another token), in `pump_v2`.

Any other instruction in such a transaction fails it (`UnsupportedProgramId`, with a log line saying what the
devnode cannot emulate) rather than being guessed at. A failed transaction lands with its error and pays its fee
and nothing else, as on mainnet; the logs, inner instructions (CPIs and the TradeEvent self-CPI) and token
balances are those a node reports.

Layout: `run` drives a transaction (`emulate`, `Emulation`), `context` holds the scratch accounts and the failure
an instruction raises, `system`, `ata`, `token`, `pump` and `pump_v2` (with `pump_accounts` and `anchor`) execute each
program's instructions, `errors` holds the runtime's and the token program's error texts.
"""

from devnode.pump_exec.run import Emulation, TxView, emulate, involves_pump

__all__ = ["Emulation", "TxView", "emulate", "involves_pump"]

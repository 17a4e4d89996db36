"""The ledger: LiteSVM for execution plus what LiteSVM does not keep (blocks, history, blockhash
ages, indexes, retention). Pure of I/O: the node drives `tick()` from its clock and persists
`export_state()`; listeners (PubSub) are called synchronously from inside the chain.

Transaction history and blocks live in memory only; a restarted node keeps account state
(see devnode/persist.py) but starts a fresh history.

Layout: `ledger.Ledger` keeps blocks, the slot clock, history, indexes and retention and answers
reads over them; `transactions.Chain` (the entry point) adds simulate / send / execute / airdrop /
inject on top; `constants` holds the well-known accounts and the commitment levels."""

from devnode.chain.transactions import Chain

__all__ = ["Chain"]

"""What the chain remembers about blocks and landed transactions (in memory only)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from solders.account import Account
from solders.hash import Hash
from solders.pubkey import Pubkey
from solders.signature import Signature
from solders.transaction import VersionedTransaction


@dataclass
class TxRecord:
    """A landed transaction (succeeded, failed with a fee, or injected) with its status meta.

    `err` and the balance / instruction fields are kept in their mainnet JSON shapes so the
    renderers only have to pick an encoding.
    """

    signature: Signature
    slot: int
    block_time: int
    index: int  # position in its block
    transaction: VersionedTransaction
    account_keys: list[Pubkey]  # static keys, then loaded writable, then loaded readonly
    writable: list[bool]
    signer: list[bool]
    loaded_writable: list[Pubkey]
    loaded_readonly: list[Pubkey]
    err: Any
    fee: int
    pre_balances: list[int]
    post_balances: list[int]
    pre_token_balances: list[dict[str, Any]]
    post_token_balances: list[dict[str, Any]]
    log_messages: list[str]
    inner_instructions: list[dict[str, Any]]
    compute_units: int
    return_data: dict[str, Any] | None
    priority_fee: int  # SetComputeUnitPrice, micro-lamports per CU
    injected: bool = False

    @property
    def version(self) -> int | None:
        """0 or 1 for versioned transactions, None for legacy ones."""
        v = self.transaction.version()
        return v if isinstance(v, int) else None

    @property
    def writable_keys(self) -> list[Pubkey]:
        return [k for k, w in zip(self.account_keys, self.writable, strict=True) if w]


@dataclass
class Block:
    """A closed slot. Every slot produces a block (single validator, nothing skipped)."""

    slot: int
    parent_slot: int
    block_height: int
    blockhash: Hash
    previous_blockhash: Hash
    block_time: int
    signatures: list[Signature] = field(default_factory=list)


@dataclass
class ChainSnapshot:
    """A chain's whole state at one point, as a follower loads it (`Ledger.load_replica`): its position (the
    open slot, with the transactions that already landed in it), its newest closed block and that block's
    transactions, the blockhashes still valid, and every account other than LiteSVM's own programs and sysvars
    (an account closed since is None). History before the block is not part of it."""

    genesis_hash: Hash
    start_time: float
    slot: int  # the open slot
    block_height: int  # the open slot's
    open_time: int  # the open slot's block time
    transaction_count: int  # every transaction landed so far, those of the open slot included
    block: Block  # the newest closed block
    block_records: list[TxRecord]
    open_records: list[TxRecord]  # landed in the open slot so far, in order
    hash_valid: dict[Hash, int]  # blockhash -> the last block height it is valid at
    accounts: dict[Pubkey, Account | None]

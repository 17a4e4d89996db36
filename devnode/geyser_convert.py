"""What the chain records, as geyser updates: a landed transaction, the accounts it wrote, a closed block.

The shapes are the public geyser plugin's (``solana-storage.proto``'s confirmed-block types): raw
32-byte keys and 64-byte signatures, the status meta with its balances, logs, inner instructions and
token balances, the error bincode-encoded as the validator stores it (``TransactionError.err``).
"""

from __future__ import annotations

import base64
import struct
from typing import Any

import base58
from solders.account import Account
from solders.message import MessageV0
from solders.pubkey import Pubkey

from devnode.records import Block, TxRecord
from geyser_proto import geyser_pb2, solana_storage_pb2

VOTE_PROGRAM = Pubkey.from_string("Vote111111111111111111111111111111111111111")
SYSTEM_PROGRAM = Pubkey.default()

# Agave's TransactionError and InstructionError variants in declaration order: bincode writes the
# variant's index as a little-endian u32, then its fields.
_TX_ERRORS = (
    "AccountInUse AccountLoadedTwice AccountNotFound ProgramAccountNotFound InsufficientFundsForFee "
    "InvalidAccountForFee AlreadyProcessed BlockhashNotFound InstructionError CallChainTooDeep "
    "MissingSignatureForFee InvalidAccountIndex SignatureFailure InvalidProgramForExecution SanitizeFailure "
    "ClusterMaintenance AccountBorrowOutstanding WouldExceedMaxBlockCostLimit UnsupportedVersion "
    "InvalidWritableAccount WouldExceedMaxAccountCostLimit WouldExceedAccountDataBlockLimit TooManyAccountLocks "
    "AddressLookupTableNotFound InvalidAddressLookupTableOwner InvalidAddressLookupTableData "
    "InvalidAddressLookupTableIndex InvalidRentPayingAccount WouldExceedMaxVoteCostLimit "
    "WouldExceedAccountDataTotalLimit DuplicateInstruction InsufficientFundsForRent "
    "MaxLoadedAccountsDataSizeExceeded InvalidLoadedAccountsDataSizeLimit ResanitizationNeeded "
    "ProgramExecutionTemporarilyRestricted UnbalancedTransaction ProgramCacheHitMaxLimit CommitCancelled"
).split()
_IX_ERRORS = (
    "GenericError InvalidArgument InvalidInstructionData InvalidAccountData AccountDataTooSmall InsufficientFunds "
    "IncorrectProgramId MissingRequiredSignature AccountAlreadyInitialized UninitializedAccount "
    "UnbalancedInstruction ModifiedProgramId ExternalAccountLamportSpend ExternalAccountDataModified "
    "ReadonlyLamportChange ReadonlyDataModified DuplicateAccountIndex ExecutableModified RentEpochModified "
    "NotEnoughAccountKeys AccountDataSizeChanged AccountNotExecutable AccountBorrowFailed AccountBorrowOutstanding "
    "DuplicateAccountOutOfSync Custom InvalidError ExecutableDataModified ExecutableLamportChange "
    "ExecutableAccountNotRentExempt UnsupportedProgramId CallDepth MissingAccount ReentrancyNotAllowed "
    "MaxSeedLengthExceeded InvalidSeeds InvalidRealloc ComputationalBudgetExceeded PrivilegeEscalation "
    "ProgramEnvironmentSetupFailure ProgramFailedToComplete ProgramFailedToCompile Immutable IncorrectAuthority "
    "BorshIoError AccountNotRentExempt InvalidAccountOwner ArithmeticOverflow UnsupportedSysvar IllegalOwner "
    "MaxAccountsDataAllocationsExceeded MaxAccountsExceeded MaxInstructionTraceLengthExceeded "
    "BuiltinProgramsMustConsumeComputeUnits"
).split()


def _variant(names: list[str], name: str) -> bytes:
    return struct.pack("<I", names.index(name) if name in names else 0)


def error_bincode(err: Any) -> bytes:
    """A TransactionError in its mainnet JSON shape (``"AccountNotFound"``, ``{"InstructionError": [0,
    {"Custom": 1}]}``...) as bincode."""
    if isinstance(err, str):
        return _variant(_TX_ERRORS, err)
    (name, value), *_ = err.items()
    out = _variant(_TX_ERRORS, name)
    if name == "InstructionError":
        index, inner = value
        out += bytes([index])
        if isinstance(inner, str):
            return out + _variant(_IX_ERRORS, inner)
        (inner_name, inner_value), *_ = inner.items()
        out += _variant(_IX_ERRORS, inner_name)
        if inner_name == "Custom":
            out += struct.pack("<I", int(inner_value))
        elif inner_name == "BorshIoError":
            raw = str(inner_value).encode()
            out += struct.pack("<Q", len(raw)) + raw
        return out
    if isinstance(value, dict):  # {"account_index": n}
        return out + bytes([int(next(iter(value.values())))])
    return out + bytes([int(value)])


def transaction_update(rec: TxRecord, created_at: float) -> geyser_pb2.SubscribeUpdate:
    info = geyser_pb2.SubscribeUpdateTransactionInfo(
        signature=bytes(rec.signature),
        is_vote=VOTE_PROGRAM in rec.account_keys,
        index=rec.index,
    )
    info.transaction.CopyFrom(_transaction(rec))
    info.meta.CopyFrom(_meta(rec))
    update = geyser_pb2.SubscribeUpdate(transaction=geyser_pb2.SubscribeUpdateTransaction(slot=rec.slot))
    update.transaction.transaction.CopyFrom(info)
    update.created_at.FromNanoseconds(int(created_at * 1e9))
    return update


def _transaction(rec: TxRecord) -> solana_storage_pb2.Transaction:
    tx = rec.transaction
    msg = tx.message
    header = msg.header
    out = solana_storage_pb2.Transaction(signatures=[bytes(s) for s in tx.signatures])
    message = out.message
    message.header.num_required_signatures = header.num_required_signatures
    message.header.num_readonly_signed_accounts = header.num_readonly_signed_accounts
    message.header.num_readonly_unsigned_accounts = header.num_readonly_unsigned_accounts
    message.account_keys.extend(bytes(k) for k in msg.account_keys)
    message.recent_blockhash = bytes(msg.recent_blockhash)
    for ix in msg.instructions:
        message.instructions.add(program_id_index=ix.program_id_index, accounts=bytes(ix.accounts), data=bytes(ix.data))
    if isinstance(msg, MessageV0):
        message.versioned = True
        for lookup in msg.address_table_lookups:
            message.address_table_lookups.add(
                account_key=bytes(lookup.account_key),
                writable_indexes=bytes(lookup.writable_indexes),
                readonly_indexes=bytes(lookup.readonly_indexes),
            )
    return out


def _meta(rec: TxRecord) -> solana_storage_pb2.TransactionStatusMeta:
    meta = solana_storage_pb2.TransactionStatusMeta(
        fee=rec.fee,
        pre_balances=rec.pre_balances,
        post_balances=rec.post_balances,
        log_messages=rec.log_messages,
        loaded_writable_addresses=[bytes(k) for k in rec.loaded_writable],
        loaded_readonly_addresses=[bytes(k) for k in rec.loaded_readonly],
        compute_units_consumed=rec.compute_units,
        return_data_none=rec.return_data is None,
    )
    if rec.err is not None:
        meta.err.err = error_bincode(rec.err)
    for group in rec.inner_instructions:
        inner = meta.inner_instructions.add(index=group["index"])
        for ii in group["instructions"]:
            inner.instructions.add(
                program_id_index=ii["programIdIndex"],
                accounts=bytes(ii["accounts"]),
                data=base58.b58decode(ii["data"]),
                stack_height=ii.get("stackHeight") or 1,
            )
    for source, target in (
        (rec.pre_token_balances, meta.pre_token_balances),
        (rec.post_token_balances, meta.post_token_balances),
    ):
        for balance in source:
            amount = balance["uiTokenAmount"]
            target.add(
                account_index=balance["accountIndex"],
                mint=balance["mint"],
                owner=balance.get("owner", ""),
                program_id=balance.get("programId", ""),
                ui_token_amount=solana_storage_pb2.UiTokenAmount(
                    ui_amount=amount.get("uiAmount") or 0.0,
                    decimals=amount["decimals"],
                    amount=amount["amount"],
                    ui_amount_string=amount["uiAmountString"],
                ),
            )
    if rec.return_data is not None:
        meta.return_data.program_id = bytes(Pubkey.from_string(rec.return_data["programId"]))
        meta.return_data.data = base64.b64decode(rec.return_data["data"][0])
    return meta


def account_update(
    key: Pubkey, account: Account | None, rec: TxRecord, write_version: int, created_at: float
) -> geyser_pb2.SubscribeUpdate:
    """An account as the transaction ``rec`` left it (a closed account: no lamports, no data, the System program)."""
    shown = account if account is not None else Account(0, b"", SYSTEM_PROGRAM)
    info = geyser_pb2.SubscribeUpdateAccountInfo(
        pubkey=bytes(key),
        lamports=shown.lamports,
        owner=bytes(shown.owner),
        executable=shown.executable,
        rent_epoch=shown.rent_epoch,
        data=bytes(shown.data),
        write_version=write_version,
        txn_signature=bytes(rec.signature),
    )
    update = geyser_pb2.SubscribeUpdate(account=geyser_pb2.SubscribeUpdateAccount(slot=rec.slot, is_startup=False))
    update.account.account.CopyFrom(info)
    update.created_at.FromNanoseconds(int(created_at * 1e9))
    return update


def slot_update(slot: int, parent: int | None, status: int, created_at: float) -> geyser_pb2.SubscribeUpdate:
    update = geyser_pb2.SubscribeUpdate(slot=geyser_pb2.SubscribeUpdateSlot(slot=slot, status=status))  # type: ignore[arg-type]
    if parent is not None:
        update.slot.parent = parent
    update.created_at.FromNanoseconds(int(created_at * 1e9))
    return update


def block_meta_update(block: Block, created_at: float) -> geyser_pb2.SubscribeUpdate:
    meta = geyser_pb2.SubscribeUpdateBlockMeta(
        slot=block.slot,
        blockhash=str(block.blockhash),
        parent_slot=block.parent_slot,
        parent_blockhash=str(block.previous_blockhash),
        executed_transaction_count=len(block.signatures),
    )
    meta.rewards.SetInParent()
    meta.block_time.timestamp = block.block_time
    meta.block_height.block_height = block.block_height
    update = geyser_pb2.SubscribeUpdate(block_meta=meta)
    update.created_at.FromNanoseconds(int(created_at * 1e9))
    return update

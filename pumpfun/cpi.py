"""`Call` builders for the system, token, associated-token, Metaplex and compute-budget invocations a pump
transaction makes, with the log lines those programs print on mainnet and representative compute units.

The instruction data are the real encodings; the compute units are typical figures, not measurements.
"""

from __future__ import annotations

from solders.pubkey import Pubkey

from pumpfun import spl
from pumpfun._borsh import Writer
from pumpfun.events import Event, event_cpi_data, program_data_log
from pumpfun.ids import (
    ASSOCIATED_TOKEN_PROGRAM_ID,
    COMPUTE_BUDGET_PROGRAM_ID,
    MPL_TOKEN_METADATA_PROGRAM_ID,
    RENT_SYSVAR_ID,
    SYSTEM_PROGRAM_ID,
    TOKEN_2022_PROGRAM_ID,
    TOKEN_PROGRAM_ID,
)
from pumpfun.trace import Call

__all__ = [
    "ata_create",
    "compute_unit_limit",
    "compute_unit_price",
    "emit_event",
    "metadata_pointer_initialize",
    "metaplex_create_metadata_v3",
    "system_create_account",
    "system_transfer",
    "token_burn",
    "token_initialize_mint2",
    "token_metadata_initialize",
    "token_mint_to",
    "token_revoke_mint_authority",
    "token_sync_native",
    "token_transfer",
]

_SYSTEM_UNITS = 150
_EVENT_CPI_UNITS = 2_003  # what an Anchor emit_cpi! self-CPI reports on mainnet


def compute_unit_limit(units: int) -> Call:
    return Call(COMPUTE_BUDGET_PROGRAM_ID, [], bytes([2]) + units.to_bytes(4, "little"), units=150)


def compute_unit_price(micro_lamports: int) -> Call:
    return Call(COMPUTE_BUDGET_PROGRAM_ID, [], bytes([3]) + micro_lamports.to_bytes(8, "little"), units=150)


def system_transfer(source: Pubkey, destination: Pubkey, lamports: int) -> Call:
    return Call(SYSTEM_PROGRAM_ID, [source, destination], spl.system_transfer_data(lamports), units=_SYSTEM_UNITS)


def system_create_account(payer: Pubkey, new: Pubkey, lamports: int, space: int, owner: Pubkey) -> Call:
    data = spl.system_create_account_data(lamports, space, owner)
    return Call(SYSTEM_PROGRAM_ID, [payer, new], data, units=_SYSTEM_UNITS)


def _token(program: Pubkey, name: str, accounts: list[Pubkey], data: bytes, units: int) -> Call:
    return Call(program, accounts, data, units=units, body=[f"Program log: Instruction: {name}"])


def token_transfer(
    program: Pubkey,
    source: Pubkey,
    mint: Pubkey,
    destination: Pubkey,
    authority: Pubkey,
    amount: int,
    decimals: int,
) -> Call:
    """`Transfer` on SPL Token, `TransferChecked` on Token-2022 (which requires the mint)."""
    if program == TOKEN_2022_PROGRAM_ID:
        data = spl.token_transfer_checked_data(amount, decimals)
        return _token(program, "TransferChecked", [source, mint, destination, authority], data, 2_475)
    return _token(program, "Transfer", [source, destination, authority], spl.token_transfer_data(amount), 4_645)


def token_mint_to(program: Pubkey, mint: Pubkey, destination: Pubkey, authority: Pubkey, amount: int) -> Call:
    return _token(program, "MintTo", [mint, destination, authority], spl.token_mint_to_data(amount), 4_492)


def token_burn(program: Pubkey, account: Pubkey, mint: Pubkey, authority: Pubkey, amount: int) -> Call:
    data = bytes([8]) + amount.to_bytes(8, "little")
    return _token(program, "Burn", [account, mint, authority], data, 4_753)


def token_revoke_mint_authority(program: Pubkey, mint: Pubkey, current_authority: Pubkey) -> Call:
    data = spl.token_set_authority_data(0, None)
    return _token(program, "SetAuthority", [mint, current_authority], data, 2_911)


def token_initialize_mint2(program: Pubkey, mint: Pubkey, decimals: int, authority: Pubkey) -> Call:
    data = spl.token_initialize_mint2_data(decimals, authority, None)
    return _token(program, "InitializeMint2", [mint], data, 2_780)


def token_sync_native(account: Pubkey) -> Call:
    return _token(TOKEN_PROGRAM_ID, "SyncNative", [account], spl.token_sync_native_data(), 3_045)


def metadata_pointer_initialize(mint: Pubkey, authority: Pubkey | None) -> Call:
    data = spl.token_metadata_pointer_initialize_data(authority, mint)
    return Call(
        TOKEN_2022_PROGRAM_ID, [mint], data, units=1_276, body=["Program log: MetadataPointerInstruction::Initialize"]
    )


def token_metadata_initialize(
    mint: Pubkey, update_authority: Pubkey, mint_authority: Pubkey, name: str, symbol: str, uri: str
) -> Call:
    data = spl.token_metadata_initialize_data(name, symbol, uri)
    return Call(
        TOKEN_2022_PROGRAM_ID,
        [mint, update_authority, mint, mint_authority],
        data,
        units=9_658,
        body=["Program log: TokenMetadataInstruction: Initialize"],
    )


def metaplex_create_metadata_v3(
    metadata: Pubkey, mint: Pubkey, mint_authority: Pubkey, payer: Pubkey, name: str, symbol: str, uri: str
) -> Call:
    """CreateMetadataAccountV3 (Metaplex instruction 33): DataV2 with no creators, collection or uses."""
    data = (
        Writer(bytes([33]))
        .string(name)
        .string(symbol)
        .string(uri)
        .u16(0)  # seller_fee_basis_points
        .u8(0)  # creators: None
        .u8(0)  # collection: None
        .u8(0)  # uses: None
        .bool(False)  # is_mutable
        .u8(0)  # collection_details: None
        .bytes()
    )
    accounts = [metadata, mint, mint_authority, payer, mint_authority, SYSTEM_PROGRAM_ID, RENT_SYSVAR_ID]
    return Call(
        MPL_TOKEN_METADATA_PROGRAM_ID,
        accounts,
        data,
        units=31_452,
        body=["Program log: IX: Create Metadata Accounts v3"],
    )


def ata_create(
    payer: Pubkey,
    ata: Pubkey,
    owner: Pubkey,
    mint: Pubkey,
    token_program: Pubkey,
    *,
    idempotent: bool,
    space: int,
) -> Call:
    """Associated-token-account creation with the nested calls the ATA program makes."""
    lamports = spl.rent_exempt_minimum(space)
    data = spl.ata_create_idempotent_data() if idempotent else spl.ata_create_data()
    is_2022 = token_program == TOKEN_2022_PROGRAM_ID
    immutable_owner = _token(token_program, "InitializeImmutableOwner", [ata], bytes([22]), 1_405)
    if not is_2022:
        immutable_owner.log("Program log: Please upgrade to SPL Token 2022 for immutable owner support")
    call = Call(
        ASSOCIATED_TOKEN_PROGRAM_ID,
        [payer, ata, owner, mint, SYSTEM_PROGRAM_ID, token_program],
        data,
        units=10_341 if is_2022 else 12_000,
    )
    call.log("Program log: CreateIdempotent" if idempotent else "Program log: Create")
    call.cpi(_token(token_program, "GetAccountDataSize", [mint], spl.token_get_account_data_size_data(), 1_595))
    call.cpi(system_create_account(payer, ata, lamports, space, token_program))
    call.log("Program log: Initialize the associated token account")
    call.cpi(immutable_owner)
    call.cpi(_token(token_program, "InitializeAccount3", [ata, mint], spl.token_initialize_account3_data(owner), 4_188))
    return call


def emit_event(parent: Call, program: Pubkey, event_authority: Pubkey, event: Event) -> None:
    """Append to `parent` what a program that both `emit!`s and `emit_cpi!`s an event shows:
    the `Program data:` log line, then the self-CPI carrying the event."""
    parent.log(program_data_log(event))
    parent.cpi(Call(program, [event_authority], event_cpi_data(event), units=_EVENT_CPI_UNITS))

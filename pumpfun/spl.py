"""SPL Token / Token-2022 account layouts and the instruction data of the system, token and ATA calls a
pump transaction makes, packed by hand.

Mint (82 bytes): mint_authority COption<Pubkey> (u32 tag + 32), supply u64, decimals u8, is_initialized bool,
freeze_authority COption<Pubkey>.
Token account (165 bytes): mint, owner, amount u64, delegate COption<Pubkey>, state u8, is_native COption<u64>
(u32 tag + 8), delegated_amount u64, close_authority COption<Pubkey>.
Token-2022 with extensions: the base layout padded to 165 bytes, one account-type byte (1 mint, 2 account),
then TLV entries (u16 type, u16 length, value).
"""

from __future__ import annotations

import hashlib
import struct
from dataclasses import dataclass
from typing import Final

from solders.pubkey import Pubkey

from pumpfun._borsh import Writer

__all__ = [
    "EXT_IMMUTABLE_OWNER",
    "EXT_METADATA_POINTER",
    "EXT_TOKEN_METADATA",
    "MINT_SIZE",
    "RENT_EXEMPT_SYSTEM_ACCOUNT",
    "TOKEN_2022_ACCOUNT_SIZE",
    "TOKEN_ACCOUNT_SIZE",
    "TokenAccountState",
    "ata_create_data",
    "ata_create_idempotent_data",
    "decode_token_account_amount",
    "pack_mint",
    "pack_mint_2022_with_metadata",
    "pack_token_account",
    "pack_token_account_2022",
    "rent_exempt_minimum",
    "system_create_account_data",
    "system_transfer_data",
    "token_get_account_data_size_data",
    "token_initialize_account3_data",
    "token_initialize_immutable_owner_data",
    "token_initialize_mint2_data",
    "token_metadata_initialize_data",
    "token_metadata_pointer_initialize_data",
    "token_mint_to_data",
    "token_set_authority_data",
    "token_sync_native_data",
    "token_transfer_checked_data",
    "token_transfer_data",
]

MINT_SIZE: Final = 82
TOKEN_ACCOUNT_SIZE: Final = 165
#: Token-2022 associated token account: base + account type + ImmutableOwner TLV (4 bytes).
TOKEN_2022_ACCOUNT_SIZE: Final = 170

EXT_IMMUTABLE_OWNER: Final = 7
EXT_METADATA_POINTER: Final = 18
EXT_TOKEN_METADATA: Final = 19

_ACCOUNT_TYPE_MINT: Final = 1
_ACCOUNT_TYPE_ACCOUNT: Final = 2

# Rent: 3480 lamports per byte-year, exempt at 2 years, plus 128 bytes of account overhead.
_LAMPORTS_PER_BYTE_YEAR: Final = 3480
_EXEMPTION_YEARS: Final = 2
_ACCOUNT_STORAGE_OVERHEAD: Final = 128


def rent_exempt_minimum(data_len: int) -> int:
    """Lamports that make an account of `data_len` bytes rent-exempt (mainnet rent parameters)."""
    return (_ACCOUNT_STORAGE_OVERHEAD + data_len) * _LAMPORTS_PER_BYTE_YEAR * _EXEMPTION_YEARS


RENT_EXEMPT_SYSTEM_ACCOUNT: Final = rent_exempt_minimum(0)


def _coption_pubkey(value: Pubkey | None) -> bytes:
    if value is None:
        return bytes(36)
    return struct.pack("<I", 1) + bytes(value)


def pack_mint(
    supply: int,
    decimals: int,
    mint_authority: Pubkey | None = None,
    freeze_authority: Pubkey | None = None,
) -> bytes:
    """The 82-byte SPL mint layout (initialized)."""
    return (
        _coption_pubkey(mint_authority)
        + struct.pack("<QB?", supply, decimals, True)
        + _coption_pubkey(freeze_authority)
    )


def _tlv(ext_type: int, value: bytes) -> bytes:
    return struct.pack("<HH", ext_type, len(value)) + value


def pack_mint_2022_with_metadata(
    mint: Pubkey,
    supply: int,
    decimals: int,
    name: str,
    symbol: str,
    uri: str,
    update_authority: Pubkey | None,
    mint_authority: Pubkey | None = None,
    freeze_authority: Pubkey | None = None,
) -> bytes:
    """A Token-2022 mint with a MetadataPointer (to itself) and an embedded TokenMetadata extension."""
    base = pack_mint(supply, decimals, mint_authority, freeze_authority)
    pointer = bytes(32) + bytes(mint)  # authority: none (zero key), metadata address: the mint itself
    metadata = (
        Writer()
        .raw(bytes(update_authority) if update_authority is not None else bytes(32))
        .pubkey(mint)
        .string(name)
        .string(symbol)
        .string(uri)
        .u32(0)  # additional_metadata: empty Vec<(String, String)>
        .bytes()
    )
    return (
        base
        + bytes(TOKEN_ACCOUNT_SIZE - MINT_SIZE)
        + bytes([_ACCOUNT_TYPE_MINT])
        + _tlv(EXT_METADATA_POINTER, pointer)
        + _tlv(EXT_TOKEN_METADATA, metadata)
    )


@dataclass(frozen=True)
class TokenAccountState:
    mint: Pubkey
    owner: Pubkey
    amount: int
    is_native: int | None = None  # rent-exempt reserve of a wrapped-SOL account


def pack_token_account(state: TokenAccountState) -> bytes:
    """The 165-byte SPL token account layout (state Initialized, no delegate, no close authority)."""
    native = bytes(12) if state.is_native is None else struct.pack("<IQ", 1, state.is_native)
    return (
        bytes(state.mint)
        + bytes(state.owner)
        + struct.pack("<Q", state.amount)
        + bytes(36)  # delegate: none
        + bytes([1])  # AccountState::Initialized
        + native
        + struct.pack("<Q", 0)  # delegated_amount
        + bytes(36)  # close_authority: none
    )


def pack_token_account_2022(state: TokenAccountState) -> bytes:
    """A Token-2022 associated token account: base layout, account type 2 and the ImmutableOwner extension."""
    return pack_token_account(state) + bytes([_ACCOUNT_TYPE_ACCOUNT]) + _tlv(EXT_IMMUTABLE_OWNER, b"")


def decode_token_account_amount(data: bytes) -> int:
    """The `amount` of an SPL or Token-2022 token account."""
    return int(struct.unpack_from("<Q", data, 64)[0])


# --- instruction data -------------------------------------------------------------------------------


def system_create_account_data(lamports: int, space: int, owner: Pubkey) -> bytes:
    return struct.pack("<IQQ", 0, lamports, space) + bytes(owner)


def system_transfer_data(lamports: int) -> bytes:
    return struct.pack("<IQ", 2, lamports)


def token_transfer_data(amount: int) -> bytes:
    return struct.pack("<BQ", 3, amount)


def token_transfer_checked_data(amount: int, decimals: int) -> bytes:
    return struct.pack("<BQB", 12, amount, decimals)


def token_mint_to_data(amount: int) -> bytes:
    return struct.pack("<BQ", 7, amount)


def token_initialize_mint2_data(decimals: int, mint_authority: Pubkey, freeze_authority: Pubkey | None) -> bytes:
    freeze = b"\x00" if freeze_authority is None else b"\x01" + bytes(freeze_authority)
    return bytes([20, decimals]) + bytes(mint_authority) + freeze


def token_set_authority_data(authority_type: int, new_authority: Pubkey | None) -> bytes:
    """SetAuthority (6); authority_type 0 is MintTokens. `None` revokes the authority."""
    new = b"\x00" if new_authority is None else b"\x01" + bytes(new_authority)
    return bytes([6, authority_type]) + new


def token_initialize_account3_data(owner: Pubkey) -> bytes:
    return bytes([18]) + bytes(owner)


def token_initialize_immutable_owner_data() -> bytes:
    return bytes([22])


def token_get_account_data_size_data() -> bytes:
    return bytes([21])


def token_sync_native_data() -> bytes:
    return bytes([17])


def token_metadata_pointer_initialize_data(authority: Pubkey | None, metadata_address: Pubkey) -> bytes:
    """Token-2022 MetadataPointerExtension (39) / Initialize (0)."""
    return bytes([39, 0]) + (bytes(authority) if authority is not None else bytes(32)) + bytes(metadata_address)


def token_metadata_initialize_data(name: str, symbol: str, uri: str) -> bytes:
    """spl-token-metadata-interface Initialize: `sha256("spl_token_metadata_interface:initialize_account")[:8]`."""
    disc = hashlib.sha256(b"spl_token_metadata_interface:initialize_account").digest()[:8]
    return Writer(disc).string(name).string(symbol).string(uri).bytes()


def ata_create_data() -> bytes:
    return bytes([0])


def ata_create_idempotent_data() -> bytes:
    return bytes([1])

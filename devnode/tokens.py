"""SPL Token / Token-2022 state decoding, shared by the chain (token indexes, token balances) and the
JSON renderers (jsonParsed accounts). Decoded by hand because Token-2022 accounts carry extensions
that solders' fixed-size layouts reject."""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import Any

from solders.account import Account
from solders.pubkey import Pubkey

TOKEN_PROGRAM_ID = Pubkey.from_string("TokenkegQfeZyiNwAJbNbGKPFXCWuBvf9Ss623VQ5DA")
TOKEN_2022_PROGRAM_ID = Pubkey.from_string("TokenzQdBNbLqP5VEhdkAS6EPFLC1PHnBqCXEpPxuEb")
TOKEN_PROGRAMS = frozenset({TOKEN_PROGRAM_ID, TOKEN_2022_PROGRAM_ID})
ATA_PROGRAM_ID = Pubkey.from_string("ATokenGPvbdGVxr1b2hvZbsiqW5xWH25efTNsLJA8knL")
NATIVE_MINT = Pubkey.from_string("So11111111111111111111111111111111111111112")

MINT_LEN = 82
ACCOUNT_LEN = 165
MULTISIG_LEN = 355
_ACCOUNT_TYPE_MINT = 1
_ACCOUNT_TYPE_ACCOUNT = 2
_STATES = {0: "uninitialized", 1: "initialized", 2: "frozen"}


@dataclass(frozen=True)
class TokenAccountState:
    """The base fields of an SPL token account."""

    mint: Pubkey
    owner: Pubkey
    amount: int
    delegate: Pubkey | None
    state: int
    is_native: int | None
    delegated_amount: int
    close_authority: Pubkey | None
    extensions: bytes


@dataclass(frozen=True)
class MintState:
    """The base fields of an SPL mint."""

    mint_authority: Pubkey | None
    supply: int
    decimals: int
    is_initialized: bool
    freeze_authority: Pubkey | None
    extensions: bytes


def program_name(owner: Pubkey) -> str:
    """The `program` label mainnet puts on parsed account data."""
    return "spl-token-2022" if owner == TOKEN_2022_PROGRAM_ID else "spl-token"


def _coption_pubkey(data: bytes, offset: int) -> Pubkey | None:
    tag = struct.unpack_from("<I", data, offset)[0]
    return Pubkey.from_bytes(data[offset + 4 : offset + 36]) if tag == 1 else None


def _is_token_account_data(data: bytes) -> bool:
    if len(data) == ACCOUNT_LEN:
        return True
    if len(data) > ACCOUNT_LEN and len(data) != MULTISIG_LEN:
        return data[ACCOUNT_LEN] == _ACCOUNT_TYPE_ACCOUNT
    return False


def _is_mint_data(data: bytes) -> bool:
    if len(data) == MINT_LEN:
        return True
    if len(data) > ACCOUNT_LEN and len(data) != MULTISIG_LEN:
        return data[ACCOUNT_LEN] == _ACCOUNT_TYPE_MINT
    return False


def decode_token_account(account: Account | None) -> TokenAccountState | None:
    """The token account state, or None when `account` is not an initialized token account."""
    if account is None or account.owner not in TOKEN_PROGRAMS:
        return None
    data = bytes(account.data)
    if not _is_token_account_data(data):
        return None
    state = data[108]
    if state == 0:
        return None
    native_tag = struct.unpack_from("<I", data, 109)[0]
    return TokenAccountState(
        mint=Pubkey.from_bytes(data[0:32]),
        owner=Pubkey.from_bytes(data[32:64]),
        amount=struct.unpack_from("<Q", data, 64)[0],
        delegate=_coption_pubkey(data, 72),
        state=state,
        is_native=struct.unpack_from("<Q", data, 113)[0] if native_tag == 1 else None,
        delegated_amount=struct.unpack_from("<Q", data, 121)[0],
        close_authority=_coption_pubkey(data, 129),
        extensions=data[ACCOUNT_LEN + 1 :] if len(data) > ACCOUNT_LEN else b"",
    )


def decode_mint(account: Account | None) -> MintState | None:
    """The mint state, or None when `account` is not an initialized mint."""
    if account is None or account.owner not in TOKEN_PROGRAMS:
        return None
    data = bytes(account.data)
    if not _is_mint_data(data) or data[45] == 0:
        return None
    return MintState(
        mint_authority=_coption_pubkey(data, 0),
        supply=struct.unpack_from("<Q", data, 36)[0],
        decimals=data[44],
        is_initialized=bool(data[45]),
        freeze_authority=_coption_pubkey(data, 46),
        extensions=data[ACCOUNT_LEN + 1 :] if len(data) > ACCOUNT_LEN else b"",
    )


def encode_mint(mint_authority: Pubkey | None, supply: int, decimals: int, freeze_authority: Pubkey | None) -> bytes:
    """An 82-byte SPL Token mint (used for the genesis USDC mint)."""

    def coption(key: Pubkey | None) -> bytes:
        return struct.pack("<I", 1) + bytes(key) if key is not None else struct.pack("<I", 0) + bytes(32)

    return coption(mint_authority) + struct.pack("<QBB", supply, decimals, 1) + coption(freeze_authority)


def ui_amount_string(amount: int, decimals: int) -> str:
    """Mainnet's `real_number_string_trimmed`."""
    if decimals == 0:
        return str(amount)
    digits = str(amount).rjust(decimals + 1, "0")
    whole, frac = digits[:-decimals], digits[-decimals:].rstrip("0")
    return f"{whole}.{frac}" if frac else whole


def ui_token_amount(amount: int, decimals: int) -> dict[str, Any]:
    """The `UiTokenAmount` JSON object."""
    return {
        "amount": str(amount),
        "decimals": decimals,
        "uiAmount": amount / (10**decimals),
        "uiAmountString": ui_amount_string(amount, decimals),
    }


def _optional_nonzero(data: bytes) -> str | None:
    return None if data == bytes(32) else str(Pubkey.from_bytes(data))


def _read_str(data: bytes, offset: int) -> tuple[str, int]:
    n = struct.unpack_from("<I", data, offset)[0]
    return data[offset + 4 : offset + 4 + n].decode("utf-8", "replace"), offset + 4 + n


def _parse_extension(ext_type: int, value: bytes) -> dict[str, Any]:
    if ext_type == 3:
        return {"extension": "mintCloseAuthority", "state": {"closeAuthority": _optional_nonzero(value[:32])}}
    if ext_type == 7:
        return {"extension": "immutableOwner"}
    if ext_type == 9:
        return {"extension": "nonTransferable"}
    if ext_type == 13:
        return {"extension": "nonTransferableAccount"}
    if ext_type == 12:
        return {"extension": "permanentDelegate", "state": {"delegate": _optional_nonzero(value[:32])}}
    if ext_type == 18:
        return {
            "extension": "metadataPointer",
            "state": {"authority": _optional_nonzero(value[:32]), "metadataAddress": _optional_nonzero(value[32:64])},
        }
    if ext_type == 19:
        try:
            offset = 64
            name, offset = _read_str(value, offset)
            symbol, offset = _read_str(value, offset)
            uri, offset = _read_str(value, offset)
            count = struct.unpack_from("<I", value, offset)[0]
            offset += 4
            extra: list[list[str]] = []
            for _ in range(count):
                key, offset = _read_str(value, offset)
                val, offset = _read_str(value, offset)
                extra.append([key, val])
        except (struct.error, IndexError):
            return {"extension": "unparseableExtension"}
        return {
            "extension": "tokenMetadata",
            "state": {
                "additionalMetadata": extra,
                "mint": str(Pubkey.from_bytes(value[32:64])),
                "name": name,
                "symbol": symbol,
                "updateAuthority": _optional_nonzero(value[:32]),
                "uri": uri,
            },
        }
    return {"extension": "unparseableExtension"}


def parse_extensions(tlv: bytes) -> list[dict[str, Any]]:
    """Token-2022 TLV extensions in mainnet's jsonParsed shape (common ones; others unparseable)."""
    out: list[dict[str, Any]] = []
    offset = 0
    while offset + 4 <= len(tlv):
        ext_type, length = struct.unpack_from("<HH", tlv, offset)
        if ext_type == 0:
            break
        out.append(_parse_extension(ext_type, tlv[offset + 4 : offset + 4 + length]))
        offset += 4 + length
    return out


def parsed_token_account_info(state: TokenAccountState, decimals: int, owner_program: Pubkey) -> dict[str, Any]:
    """`parsed.info` of a token account in jsonParsed encoding."""
    info: dict[str, Any] = {
        "isNative": state.is_native is not None,
        "mint": str(state.mint),
        "owner": str(state.owner),
        "state": _STATES.get(state.state, "uninitialized"),
        "tokenAmount": ui_token_amount(state.amount, decimals),
    }
    if state.delegate is not None:
        info["delegate"] = str(state.delegate)
        info["delegatedAmount"] = ui_token_amount(state.delegated_amount, decimals)
    if state.is_native is not None:
        info["rentExemptReserve"] = ui_token_amount(state.is_native, decimals)
    if state.close_authority is not None:
        info["closeAuthority"] = str(state.close_authority)
    if owner_program == TOKEN_2022_PROGRAM_ID and state.extensions:
        info["extensions"] = parse_extensions(state.extensions)
    return info


def parsed_mint_info(state: MintState, owner_program: Pubkey) -> dict[str, Any]:
    """`parsed.info` of a mint in jsonParsed encoding."""
    info: dict[str, Any] = {
        "decimals": state.decimals,
        "freezeAuthority": str(state.freeze_authority) if state.freeze_authority else None,
        "isInitialized": state.is_initialized,
        "mintAuthority": str(state.mint_authority) if state.mint_authority else None,
        "supply": str(state.supply),
    }
    if owner_program == TOKEN_2022_PROGRAM_ID and state.extensions:
        info["extensions"] = parse_extensions(state.extensions)
    return info

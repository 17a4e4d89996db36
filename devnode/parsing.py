"""jsonParsed instruction decoding for the programs a devnode actually runs: System, SPL Token
(and Token-2022's common instructions), Associated Token Account and Memo. Anything else renders
"partially decoded" ({programId, accounts, data}) exactly as mainnet does for unknown programs."""

from __future__ import annotations

import struct
from collections.abc import Callable
from typing import Any

import base58
from solders.pubkey import Pubkey

from devnode.tokens import ATA_PROGRAM_ID, TOKEN_PROGRAMS, ui_token_amount

SYSTEM_PROGRAM_ID = Pubkey.from_string("11111111111111111111111111111111")
COMPUTE_BUDGET_PROGRAM_ID = Pubkey.from_string("ComputeBudget111111111111111111111111111111")
MEMO_PROGRAM_IDS = frozenset(
    {
        Pubkey.from_string("MemoSq4gqABAXKb96qnH8TysNcWxMyWCqXgDLGmfcHr"),
        Pubkey.from_string("Memo1UhkJRfHyvLMcVucJwxXeuD728EqVDDwQDxFMNo"),
    }
)

Parsed = tuple[str, dict[str, Any]]


class _Unparsable(Exception):
    pass


def _acc(accounts: list[str], i: int) -> str:
    if i >= len(accounts):
        raise _Unparsable
    return accounts[i]


def _u64(data: bytes, offset: int) -> int:
    if len(data) < offset + 8:
        raise _Unparsable
    return int(struct.unpack_from("<Q", data, offset)[0])


def _pubkey(data: bytes, offset: int) -> str:
    if len(data) < offset + 32:
        raise _Unparsable
    return str(Pubkey.from_bytes(data[offset : offset + 32]))


def _bincode_str(data: bytes, offset: int) -> tuple[str, int]:
    n = _u64(data, offset)
    return data[offset + 8 : offset + 8 + n].decode("utf-8", "replace"), offset + 8 + n


def _parse_system(accounts: list[str], data: bytes) -> Parsed:
    if len(data) < 4:
        raise _Unparsable
    tag = struct.unpack_from("<I", data, 0)[0]
    if tag == 0:
        return "createAccount", {
            "lamports": _u64(data, 4),
            "newAccount": _acc(accounts, 1),
            "owner": _pubkey(data, 20),
            "source": _acc(accounts, 0),
            "space": _u64(data, 12),
        }
    if tag == 1:
        return "assign", {"account": _acc(accounts, 0), "owner": _pubkey(data, 4)}
    if tag == 2:
        return "transfer", {"destination": _acc(accounts, 1), "lamports": _u64(data, 4), "source": _acc(accounts, 0)}
    if tag == 3:
        base = _pubkey(data, 4)
        seed, off = _bincode_str(data, 36)
        return "createAccountWithSeed", {
            "base": base,
            "lamports": _u64(data, off),
            "newAccount": _acc(accounts, 1),
            "owner": _pubkey(data, off + 16),
            "seed": seed,
            "source": _acc(accounts, 0),
            "space": _u64(data, off + 8),
        }
    if tag == 8:
        return "allocate", {"account": _acc(accounts, 0), "space": _u64(data, 4)}
    if tag == 11:
        lamports = _u64(data, 4)
        seed, off = _bincode_str(data, 12)
        return "transferWithSeed", {
            "destination": _acc(accounts, 2),
            "lamports": lamports,
            "source": _acc(accounts, 0),
            "sourceBase": _acc(accounts, 1),
            "sourceOwner": _pubkey(data, off),
            "sourceSeed": seed,
        }
    raise _Unparsable


def _token_amount_fields(data: bytes) -> dict[str, Any]:
    if len(data) < 10:
        raise _Unparsable
    return {"tokenAmount": ui_token_amount(_u64(data, 1), data[9])}


def _parse_token(accounts: list[str], data: bytes) -> Parsed:
    if not data:
        raise _Unparsable
    tag = data[0]
    a = accounts
    if tag in (0, 20):
        if len(data) < 35:
            raise _Unparsable
        info: dict[str, Any] = {"decimals": data[1], "mint": _acc(a, 0), "mintAuthority": _pubkey(data, 2)}
        if len(data) >= 67 and data[34] == 1:
            info["freezeAuthority"] = _pubkey(data, 35)
        if tag == 0:
            info["rentSysvar"] = _acc(a, 1)
        return ("initializeMint" if tag == 0 else "initializeMint2"), info
    if tag == 1:
        return "initializeAccount", {
            "account": _acc(a, 0),
            "mint": _acc(a, 1),
            "owner": _acc(a, 2),
            "rentSysvar": _acc(a, 3),
        }
    if tag == 16:
        return "initializeAccount2", {
            "account": _acc(a, 0),
            "mint": _acc(a, 1),
            "owner": _pubkey(data, 1),
            "rentSysvar": _acc(a, 2),
        }
    if tag == 18:
        return "initializeAccount3", {"account": _acc(a, 0), "mint": _acc(a, 1), "owner": _pubkey(data, 1)}
    if tag == 3:
        return "transfer", {
            "amount": str(_u64(data, 1)),
            "authority": _acc(a, 2),
            "destination": _acc(a, 1),
            "source": _acc(a, 0),
        }
    if tag == 4:
        return "approve", {
            "amount": str(_u64(data, 1)),
            "delegate": _acc(a, 1),
            "owner": _acc(a, 2),
            "source": _acc(a, 0),
        }
    if tag == 5:
        return "revoke", {"owner": _acc(a, 1), "source": _acc(a, 0)}
    if tag == 7:
        return "mintTo", {
            "account": _acc(a, 1),
            "amount": str(_u64(data, 1)),
            "mint": _acc(a, 0),
            "mintAuthority": _acc(a, 2),
        }
    if tag == 8:
        return "burn", {
            "account": _acc(a, 0),
            "amount": str(_u64(data, 1)),
            "authority": _acc(a, 2),
            "mint": _acc(a, 1),
        }
    if tag == 9:
        return "closeAccount", {"account": _acc(a, 0), "destination": _acc(a, 1), "owner": _acc(a, 2)}
    if tag in (10, 11):
        return ("freezeAccount" if tag == 10 else "thawAccount"), {
            "account": _acc(a, 0),
            "freezeAuthority": _acc(a, 2),
            "mint": _acc(a, 1),
        }
    if tag == 12:
        return "transferChecked", {
            "authority": _acc(a, 3),
            "destination": _acc(a, 2),
            "mint": _acc(a, 1),
            "source": _acc(a, 0),
            **_token_amount_fields(data),
        }
    if tag == 13:
        return "approveChecked", {
            "delegate": _acc(a, 2),
            "mint": _acc(a, 1),
            "owner": _acc(a, 3),
            "source": _acc(a, 0),
            **_token_amount_fields(data),
        }
    if tag == 14:
        return "mintToChecked", {
            "account": _acc(a, 1),
            "mint": _acc(a, 0),
            "mintAuthority": _acc(a, 2),
            **_token_amount_fields(data),
        }
    if tag == 15:
        return "burnChecked", {
            "account": _acc(a, 0),
            "authority": _acc(a, 2),
            "mint": _acc(a, 1),
            **_token_amount_fields(data),
        }
    if tag == 17:
        return "syncNative", {"account": _acc(a, 0)}
    if tag == 21:
        return "getAccountDataSize", {"mint": _acc(a, 0)}
    if tag == 22:
        return "initializeImmutableOwner", {"account": _acc(a, 0)}
    raise _Unparsable


def _parse_ata(accounts: list[str], data: bytes) -> Parsed:
    kind = data[0] if data else 0
    if kind not in (0, 1):
        raise _Unparsable
    return ("create" if kind == 0 else "createIdempotent"), {
        "account": _acc(accounts, 1),
        "mint": _acc(accounts, 3),
        "source": _acc(accounts, 0),
        "systemProgram": _acc(accounts, 4),
        "tokenProgram": _acc(accounts, 5),
        "wallet": _acc(accounts, 2),
    }


_PARSERS: dict[Pubkey, tuple[str, Callable[[list[str], bytes], Parsed]]] = {
    SYSTEM_PROGRAM_ID: ("system", _parse_system),
    ATA_PROGRAM_ID: ("spl-associated-token-account", _parse_ata),
    **{p: ("spl-token", _parse_token) for p in TOKEN_PROGRAMS},
}


def parse_instruction(
    program_id: Pubkey, accounts: list[Pubkey], data: bytes, stack_height: int | None
) -> dict[str, Any]:
    """One instruction in jsonParsed form (parsed when the program is known, else partially decoded)."""
    names = [str(k) for k in accounts]
    if program_id in MEMO_PROGRAM_IDS:
        return {
            "parsed": data.decode("utf-8", "replace"),
            "program": "spl-memo",
            "programId": str(program_id),
            "stackHeight": stack_height,
        }
    entry = _PARSERS.get(program_id)
    if entry is not None:
        program, parser = entry
        try:
            kind, info = parser(names, data)
        except (_Unparsable, struct.error, ValueError):
            pass
        else:
            return {
                "parsed": {"info": info, "type": kind},
                "program": program,
                "programId": str(program_id),
                "stackHeight": stack_height,
            }
    return {
        "accounts": names,
        "data": base58.b58encode(data).decode(),
        "programId": str(program_id),
        "stackHeight": stack_height,
    }


def compute_budget_price_and_limit(program_ids_and_data: list[tuple[Pubkey, bytes]]) -> tuple[int, int | None]:
    """(SetComputeUnitPrice micro-lamports, SetComputeUnitLimit or None) of a message's instructions."""
    price, limit = 0, None
    for program_id, data in program_ids_and_data:
        if program_id != COMPUTE_BUDGET_PROGRAM_ID or not data:
            continue
        if data[0] == 3 and len(data) >= 9:
            price = int(struct.unpack_from("<Q", data, 1)[0])
        elif data[0] == 2 and len(data) >= 5:
            limit = int(struct.unpack_from("<I", data, 1)[0])
    return price, limit

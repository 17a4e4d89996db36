"""The bulk lookups' rules, pure: prices, the list limit, the key checks and reading the node's answers.

``POST /bulk/getBalances``, ``/bulk/getTokenBalances`` and ``/bulk/getTransactions`` take a list of
keys (addresses, owners, signatures) and answer one entry per distinct valid key. What is decided
here, without I/O, so it can be tested alone and published in ``/pricing``:

- the price of one item of each route and the most items a request may carry (100, the batch limit
  of the JSON-RPC endpoint: one ``getMultipleAccounts`` call, one node batch);
- which keys are valid (a base58 public key of 32 bytes, a base58 signature of 64 bytes); an
  invalid key is the item's error and costs nothing;
- duplicates: each distinct key is looked up, answered and charged once (first occurrence's order);
- how a node answer becomes the item's entry (lamports; token accounts with exact amounts).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from solders.pubkey import Pubkey
from solders.signature import Signature

from gateway.core.deposits import TOKEN_2022_PROGRAM_ID, TOKEN_PROGRAM_ID
from gateway.core.params import node_amount, node_integer

#: The most keys one bulk request may carry (more: 400 INVALID_REQUEST, before billing).
MAX_BULK_ITEMS = 100
#: Credits per looked-up item of each bulk route (docs/api.md, Bulk endpoints).
BULK_CREDITS: Mapping[str, int] = {"getBalances": 1, "getTokenBalances": 5, "getTransactions": 5}
#: The node's ``getMultipleAccounts`` takes at most this many addresses per call.
ACCOUNTS_PER_CALL = 100

#: The token programs a token balance lookup covers, by the names their accounts carry in the answer.
TOKEN_PROGRAMS: Mapping[str, str] = {TOKEN_PROGRAM_ID: "spl-token", TOKEN_2022_PROGRAM_ID: "spl-token-2022"}


@dataclass(frozen=True)
class ItemError:
    """Why one item got no answer. ``charged`` is always False: an item in ``errors`` is free."""

    code: str  # INVALID_ADDRESS, INVALID_SIGNATURE, UPSTREAM_ERROR, TIMEOUT
    message: str

    def to_json(self) -> dict[str, str]:
        return {"code": self.code, "message": self.message}


@dataclass(frozen=True)
class Keys:
    """A request's keys: the distinct valid ones to look up (in first-seen order) and the invalid ones."""

    valid: list[str]
    invalid: list[tuple[str, ItemError]]


def valid_address(key: str) -> bool:
    try:
        Pubkey.from_string(key)
    except ValueError:
        return False
    return True


def valid_signature(key: str) -> bool:
    try:
        Signature.from_string(key)
    except ValueError:
        return False
    return True


def split_keys(keys: Sequence[str], signatures: bool) -> Keys:
    """The distinct valid keys and the invalid ones (each once), both in the order first seen."""
    valid: dict[str, None] = {}
    invalid: dict[str, ItemError] = {}
    for key in keys:
        if key in valid or key in invalid:
            continue
        if signatures:
            ok, error = valid_signature(key), ItemError("INVALID_SIGNATURE", "not a base58 signature (64 bytes)")
        else:
            ok, error = valid_address(key), ItemError("INVALID_ADDRESS", "not a base58 public key (32 bytes)")
        if ok:
            valid[key] = None
        else:
            invalid[key] = error
    return Keys(list(valid), list(invalid.items()))


def chunks(keys: Sequence[str], size: int = ACCOUNTS_PER_CALL) -> list[list[str]]:
    return [list(keys[i : i + size]) for i in range(0, len(keys), size)]


def account_lamports(answer: Any, count: int) -> list[int] | None:
    """Each account's lamports from a ``getMultipleAccounts`` result of ``count`` addresses (an absent
    account has 0), or None when the answer is not one."""
    value = answer.get("value") if isinstance(answer, dict) else None
    if not isinstance(value, list) or len(value) != count:
        return None
    out: list[int] = []
    for account in value:
        if account is None:
            out.append(0)
            continue
        lamports = account.get("lamports") if isinstance(account, dict) else None
        if isinstance(lamports, bool) or not isinstance(lamports, int) or lamports < 0:
            return None
        out.append(lamports)
    return out


def ui_amount(amount: int, decimals: int) -> str:
    """``amount`` base units as an exact decimal string (no float): 1500000 at 6 decimals is "1.5"."""
    if decimals <= 0:
        return str(amount)
    whole, fraction = divmod(amount, 10**decimals)
    digits = f"{fraction:0{decimals}d}".rstrip("0")
    return f"{whole}.{digits}" if digits else str(whole)


def token_accounts(answer: Any, program: str) -> list[dict[str, Any]] | None:
    """The token accounts of a ``getTokenAccountsByOwner`` result (jsonParsed) of ``program``, or None
    when the answer is not one (an account the node did not parse included: its decimals are unknown)."""
    value = answer.get("value") if isinstance(answer, dict) else None
    if not isinstance(value, list):
        return None
    out: list[dict[str, Any]] = []
    for entry in value:
        parsed = _token_account(entry, program)
        if parsed is None:
            return None
        out.append(parsed)
    return out


def _token_account(entry: Any, program: str) -> dict[str, Any] | None:
    if not isinstance(entry, dict) or not isinstance(entry.get("pubkey"), str):
        return None
    account = entry.get("account")
    data = account.get("data") if isinstance(account, dict) else None
    parsed = data.get("parsed") if isinstance(data, dict) else None
    info = parsed.get("info") if isinstance(parsed, dict) else None
    amount = info.get("tokenAmount") if isinstance(info, dict) else None
    if not isinstance(info, dict) or not isinstance(amount, dict) or not isinstance(info.get("mint"), str):
        return None
    raw, decimals = amount.get("amount"), amount.get("decimals")
    tokens = node_amount(raw)  # ASCII digits of a u64 only (docs/reliability.md)
    places = node_integer(decimals, 255)
    if tokens is None or places is None:
        return None
    return {
        "address": entry["pubkey"],
        "mint": info["mint"],
        "amount": str(tokens),
        "decimals": places,
        "ui_amount": ui_amount(tokens, places),
        "program": TOKEN_PROGRAMS[program],
    }

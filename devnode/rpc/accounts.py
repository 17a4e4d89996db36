"""Account methods: account info and balances, program accounts (with their filters, which PubSub's
programSubscribe shares through `account_matches`), supply, rent exemption and airdrops."""

from __future__ import annotations

import base64
from collections.abc import Callable
from typing import Any

import base58
from solders.pubkey import Pubkey
from solders.signature import Signature

from devnode.encoding import check_account_encoding, encode_account
from devnode.errors import RpcError, invalid_params
from devnode.rpc.base import MethodGroup
from devnode.rpc.params import arg, as_pubkey, as_uint, config, data_slice, required

TOTAL_SUPPLY = 600_000_000 * 10**9


class AccountMethods(MethodGroup):
    """Handlers that read accounts (one, many, by program, the largest), the supply, rent, and airdrops."""

    _airdrop: Callable[[Pubkey, int], Signature]

    def _account_json(self, pubkey: Pubkey, cfg: dict[str, Any], default_encoding: str) -> dict[str, Any] | None:
        encoding = cfg.get("encoding") or default_encoding
        check_account_encoding(encoding)
        account = self.chain.get_account(pubkey)
        if account is None:
            return None
        return encode_account(account, encoding, data_slice(cfg), self.chain.get_account)

    def m_getAccountInfo(self, params: list[Any]) -> Any:
        pubkey = as_pubkey(required(params, 0, "pubkey"))
        return self._ctx(self._account_json(pubkey, config(params, 1), "binary"))

    def m_getMultipleAccounts(self, params: list[Any]) -> Any:
        keys = required(params, 0, "pubkeys")
        if not isinstance(keys, list):
            raise invalid_params("Invalid params: expected an array of public keys")
        if len(keys) > 100:
            raise invalid_params("Too many inputs provided; max 100")
        cfg = config(params, 1)
        return self._ctx([self._account_json(as_pubkey(k), cfg, "base64") for k in keys])

    def m_getBalance(self, params: list[Any]) -> Any:
        account = self.chain.get_account(as_pubkey(required(params, 0, "pubkey")))
        return self._ctx(account.lamports if account is not None else 0)

    def m_getProgramAccounts(self, params: list[Any]) -> Any:
        program = as_pubkey(required(params, 0, "program_id"))
        cfg = config(params, 1)
        encoding = cfg.get("encoding") or "binary"
        check_account_encoding(encoding)
        filters = cfg.get("filters") or []
        out = []
        for key, account in self.chain.svm.get_program_accounts(program):
            if all(account_matches(bytes(account.data), f) for f in filters):
                out.append(self._keyed(key, account, encoding, cfg))
        return self._ctx(out) if cfg.get("withContext") else out

    def m_getLargestAccounts(self, params: list[Any]) -> Any:
        accounts = [(a.lamports, k) for k in self.chain.touched if (a := self.chain.get_account(k)) is not None]
        accounts.sort(key=lambda x: -x[0])
        return self._ctx([{"address": str(k), "lamports": lamports} for lamports, k in accounts[:20]])

    def m_getSupply(self, params: list[Any]) -> Any:
        return self._ctx(
            {"circulating": TOTAL_SUPPLY, "nonCirculating": 0, "nonCirculatingAccounts": [], "total": TOTAL_SUPPLY}
        )

    def m_getMinimumBalanceForRentExemption(self, params: list[Any]) -> Any:
        return self.chain.svm.minimum_balance_for_rent_exemption(as_uint(arg(params, 0, 0), "data_len"))

    def m_requestAirdrop(self, params: list[Any]) -> Any:
        pubkey = as_pubkey(required(params, 0, "pubkey"))
        lamports = as_uint(required(params, 1, "lamports"), "lamports")
        try:
            return str(self._airdrop(pubkey, lamports))
        except ValueError as exc:
            raise RpcError(-32603, f"Internal error: {exc}") from exc


def account_matches(data: bytes, flt: Any) -> bool:
    """getProgramAccounts / programSubscribe filters: dataSize and memcmp (base58 or base64 bytes)."""
    if not isinstance(flt, dict):
        raise invalid_params("Invalid params: filter must be an object")
    if "dataSize" in flt:
        return len(data) == int(flt["dataSize"])
    if "memcmp" in flt:
        memcmp = flt["memcmp"]
        offset = int(memcmp.get("offset", 0))
        encoded = memcmp.get("bytes", "")
        try:
            want = base64.b64decode(encoded) if memcmp.get("encoding") == "base64" else base58.b58decode(encoded)
        except ValueError as exc:
            raise invalid_params(f"Invalid param: invalid memcmp bytes: {exc}") from exc
        return data[offset : offset + len(want)] == want
    raise invalid_params("Invalid params: unsupported filter")

"""SPL Token methods: token account balances, mint supply, token accounts by owner and largest holders,
decoded from the SPL Token / Token-2022 account layouts."""

from __future__ import annotations

from typing import Any

from devnode.encoding import check_account_encoding
from devnode.errors import invalid_params
from devnode.rpc.base import MethodGroup
from devnode.rpc.params import as_pubkey, config, required
from devnode.tokens import TOKEN_PROGRAMS, decode_mint, decode_token_account, ui_token_amount


class TokenMethods(MethodGroup):
    """Handlers that decode SPL Token accounts and mints: balances, supply, accounts by owner, holders."""

    def m_getTokenAccountBalance(self, params: list[Any]) -> Any:
        account = self.chain.get_account(as_pubkey(required(params, 0, "pubkey")))
        if account is None:
            raise invalid_params("Invalid param: could not find account")
        state = decode_token_account(account)
        if state is None:
            raise invalid_params("Invalid param: not a Token account")
        decimals = self.chain.mint_decimals(state.mint)
        if decimals is None:
            raise invalid_params("Invalid param: could not find mint")
        return self._ctx(ui_token_amount(state.amount, decimals))

    def m_getTokenSupply(self, params: list[Any]) -> Any:
        account = self.chain.get_account(as_pubkey(required(params, 0, "mint")))
        if account is None:
            raise invalid_params("Invalid param: could not find mint")
        mint = decode_mint(account)
        if mint is None:
            raise invalid_params("Invalid param: not a Token mint")
        return self._ctx(ui_token_amount(mint.supply, mint.decimals))

    def m_getTokenAccountsByOwner(self, params: list[Any]) -> Any:
        owner = as_pubkey(required(params, 0, "owner"))
        flt = required(params, 1, "filter")
        if not isinstance(flt, dict) or not ({"mint", "programId"} & flt.keys()):
            raise invalid_params("Invalid params: expected {mint} or {programId} filter")
        cfg = config(params, 2)
        encoding = cfg.get("encoding") or "binary"
        check_account_encoding(encoding)
        mint = program = None
        if "mint" in flt:
            mint = as_pubkey(flt["mint"])
            mint_account = self.chain.get_account(mint)
            if decode_mint(mint_account) is None:
                raise invalid_params("Invalid param: could not find mint")
        else:
            program = as_pubkey(flt["programId"])
            if program not in TOKEN_PROGRAMS:
                raise invalid_params("Invalid param: unrecognized Token program id")
        out = []
        for key, account in self.chain.token_accounts_of(owner):
            state = decode_token_account(account)
            if state is None or (mint is not None and state.mint != mint):
                continue
            if program is not None and account.owner != program:
                continue
            out.append(self._keyed(key, account, encoding, cfg))
        return self._ctx(out)

    def m_getTokenLargestAccounts(self, params: list[Any]) -> Any:
        mint = as_pubkey(required(params, 0, "mint"))
        mint_account = self.chain.get_account(mint)
        mint_state = decode_mint(mint_account)
        if mint_account is None or mint_state is None:
            raise invalid_params("Invalid param: could not find mint")
        holders = []
        for key, account in self.chain.svm.get_program_accounts(mint_account.owner):
            state = decode_token_account(account)
            if state is not None and state.mint == mint:
                holders.append((state.amount, key))
        holders.sort(key=lambda h: -h[0])
        return self._ctx(
            [{"address": str(k), **ui_token_amount(amount, mint_state.decimals)} for amount, k in holders[:20]]
        )

"""The SOL/USD rate a SOL/USDC pool's reserves give. Pure.

The pool is a PumpSwap pool account (`pumpfun.accounts.Pool`: its two mints and its two token accounts); the
rate is the USD side's reserve over the SOL side's, in micro-USD per SOL, rounded down::

    micro_usd_per_sol = usd_units * 10^sol_decimals * 10^6 / (sol_units * 10^usd_decimals)

with wrapped SOL on either side and the configured USD mint (USDC) on the other (docs/api.md, Trade builders).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from solders.pubkey import Pubkey

from pumpfun.accounts import Pool, decode_pool
from pumpfun.ids import PUMP_AMM_PROGRAM_ID, WSOL_MINT
from pumpfun.spl import decode_token_account_amount

__all__ = ["PoolReserves", "PoolUnreadable", "micro_usd_per_sol", "pool_of", "reserves_to_read"]

_MICRO: Final = 1_000_000
_MINT_DECIMALS_AT: Final = 44
_TOKEN_ACCOUNT_MIN: Final = 165


class PoolUnreadable(ValueError):
    """The account is not a SOL/USD pool, or its reserves cannot be read."""


@dataclass(frozen=True, slots=True)
class PoolReserves:
    """What the rate is read from: the pool's token accounts and mints, SOL side first."""

    sol_account: Pubkey
    usd_account: Pubkey
    sol_mint: Pubkey
    usd_mint: Pubkey


def pool_of(owner: Pubkey, data: bytes) -> Pool:
    if owner != PUMP_AMM_PROGRAM_ID:
        raise PoolUnreadable(f"the account is owned by {owner}, not PumpSwap")
    try:
        return decode_pool(data)
    except ValueError as exc:
        raise PoolUnreadable("the account is not a PumpSwap pool") from exc


def reserves_to_read(pool: Pool, usd_mint: Pubkey) -> PoolReserves:
    """The accounts to read for the rate: wSOL against `usd_mint`, on either side."""
    if (pool.base_mint, pool.quote_mint) == (WSOL_MINT, usd_mint):
        return PoolReserves(pool.pool_base_token_account, pool.pool_quote_token_account, WSOL_MINT, usd_mint)
    if (pool.base_mint, pool.quote_mint) == (usd_mint, WSOL_MINT):
        return PoolReserves(pool.pool_quote_token_account, pool.pool_base_token_account, WSOL_MINT, usd_mint)
    raise PoolUnreadable(f"the pool trades {pool.base_mint} against {pool.quote_mint}, not wSOL against {usd_mint}")


def _amount(data: bytes | None) -> int:
    if data is None or len(data) < _TOKEN_ACCOUNT_MIN:
        raise PoolUnreadable("a pool token account is missing or not a token account")
    return decode_token_account_amount(data)


def _decimals(data: bytes | None) -> int:
    if data is None or len(data) <= _MINT_DECIMALS_AT:
        raise PoolUnreadable("a pool mint is missing or not a mint")
    return data[_MINT_DECIMALS_AT]


def micro_usd_per_sol(sol_account: bytes | None, usd_account: bytes | None, sol_mint: bytes | None,
                      usd_mint: bytes | None) -> int:  # fmt: skip
    """The rate the reserves give (raw account data, None for a missing account)."""
    sol, usd = _amount(sol_account), _amount(usd_account)
    if sol <= 0 or usd <= 0:
        raise PoolUnreadable("the pool holds no liquidity")
    rate: int = usd * 10 ** _decimals(sol_mint) * _MICRO // (sol * 10 ** _decimals(usd_mint))
    if rate <= 0:
        raise PoolUnreadable("the pool's price rounds to zero")
    return rate

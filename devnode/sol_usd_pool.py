"""The devnode's SOL/USDC pool: a PumpSwap-layout pool (`pumpfun.accounts.Pool`) of wrapped SOL against the chain's
USDC, with real reserves in its two token accounts, installed when the chain is first made (a restart keeps the
one it has, as it keeps every account). A gateway in front of the devnode reads the SOL/USD rate off it.

Real: the Pool account's layout and owner (PumpSwap), its PDA (`["pool", 0, creator, wSOL, USDC]`), the pool's
token accounts (its associated accounts: a native wSOL account whose lamports hold the SOL, a USDC account), and
the USDC in it counted in the USDC mint's supply. Synthetic: the pool was never created by PumpSwap's
`create_pool` (no transaction, no LP mint account, no LP tokens: `lp_supply` 0), and nothing trades it, so its
price stays POOL_USDC / POOL_SOL: $150.00 a SOL.
"""

from __future__ import annotations

from typing import Final

from solders.account import Account
from solders.pubkey import Pubkey

from devnode.chain import Chain
from devnode.chain.constants import USDC_DECIMALS, USDC_MINT
from devnode.tokens import decode_mint, encode_mint
from pumpfun import pda, spl
from pumpfun.accounts import Pool, encode_pool
from pumpfun.ids import PUMP_AMM_PROGRAM_ID, TOKEN_PROGRAM_ID, WSOL_MINT

__all__ = ["POOL_SOL_LAMPORTS", "POOL_USDC_UNITS", "SOL_USD_POOL", "install_sol_usd_pool", "pool_accounts"]

#: The pool's creator: an address of the devnode's own (no key signs for it).
POOL_CREATOR: Final = Pubkey.find_program_address([b"devnode-sol-usd-pool"], PUMP_AMM_PROGRAM_ID)[0]
SOL_USD_POOL, _BUMP = pda.pool_pda_and_bump(0, POOL_CREATOR, WSOL_MINT, USDC_MINT)
#: 10,000 SOL against 1,500,000 USDC: $150.00 a SOL.
POOL_SOL_LAMPORTS: Final = 10_000 * 10**9
POOL_USDC_UNITS: Final = 1_500_000 * 10**USDC_DECIMALS
_RENT_EPOCH_EXEMPT: Final = 2**64 - 1


def pool_accounts() -> list[tuple[Pubkey, Account]]:
    """The Pool account and its two token accounts."""
    base = pda.associated_token_address(SOL_USD_POOL, WSOL_MINT, TOKEN_PROGRAM_ID)
    quote = pda.associated_token_address(SOL_USD_POOL, USDC_MINT, TOKEN_PROGRAM_ID)
    pool = Pool(
        pool_bump=_BUMP,
        index=0,
        creator=POOL_CREATOR,
        base_mint=WSOL_MINT,
        quote_mint=USDC_MINT,
        lp_mint=pda.pool_lp_mint_pda(SOL_USD_POOL),
        pool_base_token_account=base,
        pool_quote_token_account=quote,
        lp_supply=0,
        coin_creator=Pubkey.default(),
    )
    data = encode_pool(pool)
    rent = spl.rent_exempt_minimum(spl.TOKEN_ACCOUNT_SIZE)
    sol = spl.pack_token_account(spl.TokenAccountState(WSOL_MINT, SOL_USD_POOL, POOL_SOL_LAMPORTS, rent))
    usdc = spl.pack_token_account(spl.TokenAccountState(USDC_MINT, SOL_USD_POOL, POOL_USDC_UNITS))
    return [
        (
            SOL_USD_POOL,
            Account(spl.rent_exempt_minimum(len(data)), data, PUMP_AMM_PROGRAM_ID, False, _RENT_EPOCH_EXEMPT),
        ),
        (base, Account(rent + POOL_SOL_LAMPORTS, sol, TOKEN_PROGRAM_ID, False, _RENT_EPOCH_EXEMPT)),
        (quote, Account(rent, usdc, TOKEN_PROGRAM_ID, False, _RENT_EPOCH_EXEMPT)),
    ]


def install_sol_usd_pool(chain: Chain) -> None:
    """Write the pool onto a chain that has none (its USDC added to the USDC mint's supply)."""
    if chain.get_account(SOL_USD_POOL) is not None:
        return
    mint_account = chain.get_account(USDC_MINT)
    mint = decode_mint(mint_account)
    assert mint_account is not None and mint is not None  # the ledger makes the USDC mint at genesis
    supply = encode_mint(mint.mint_authority, mint.supply + POOL_USDC_UNITS, mint.decimals, mint.freeze_authority)
    chain.set_genesis_account(USDC_MINT, Account(mint_account.lamports, supply, mint_account.owner))
    for pubkey, account in pool_accounts():
        chain.set_genesis_account(pubkey, account)

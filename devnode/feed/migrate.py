"""Graduation: pump `migrate` of a completed curve into PumpSwap pool 0, with `create_pool` as its inner
CPI, as on mainnet (the account order and LP-mint details are the assumptions listed in devnode.feed).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Final

from solders.account import Account
from solders.keypair import Keypair
from solders.pubkey import Pubkey

from devnode.feed.state import RENT_EPOCH_EXEMPT, Coin, FeedState, TokenAccount, Tx, top_call
from pumpfun import cpi, pda, spl
from pumpfun.accounts import POOL_MIGRATION_FEE, TOKEN_DECIMALS, Pool, encode_pool
from pumpfun.curve import CurveReserves
from pumpfun.events import CompletePumpAmmMigrationEvent, CreatePoolEvent
from pumpfun.ids import PUMP_AMM_PROGRAM_ID, PUMP_PROGRAM_ID, TOKEN_2022_PROGRAM_ID, TOKEN_PROGRAM_ID, WSOL_MINT
from pumpfun.instructions import (
    WITHDRAW_AUTHORITY,
    CreatePoolArgs,
    create_pool_accounts,
    encode_create_pool,
    migrate_instruction,
)
from pumpfun.trace import Call

_WSOL_DECIMALS: Final = 9
_LP_DECIMALS: Final = 9
_MINIMUM_LIQUIDITY: Final = 100


@dataclass(frozen=True)
class _Migration:
    """What a migration of one coin moves, and where: the addresses and amounts every step uses."""

    coin: Coin
    user: Keypair
    pool_authority: Pubkey
    pool: Pubkey
    pool_bump: int
    lp_mint: Pubkey
    pa_base: Pubkey  # pool authority's token accounts: base, wSOL quote, LP
    pa_quote: Pubkey
    pa_lp: Pubkey
    pool_base: Pubkey  # the pool's own token accounts
    pool_quote: Pubkey
    base_space: int
    base_amount: int
    quote_amount: int
    lp_amount: int
    pool_state: Pool

    @property
    def mint(self) -> Pubkey:
        return self.coin.mint

    @property
    def program(self) -> Pubkey:
        return self.coin.token_program


def migrate(state: FeedState, coin: Coin, now: int) -> Tx:
    """pump `migrate`: the completed curve's tokens and SOL seed PumpSwap pool 0 (mint/wSOL), created by
    CPI to `create_pool` with `pool_authority` as creator; the LP tokens are burned."""
    tx = Tx("migrate", state.migrator)
    m = _plan(state, coin, tx)
    ix = migrate_instruction(m.mint, m.user.pubkey(), m.program)
    call = top_call(ix, state.rng.randint(55_000, 70_000)).log("Program log: Instruction: Migrate")
    _move_reserves_to_pool_authority(call, m)
    call.cpi(_create_pool(m, now))
    call.cpi(cpi.token_burn(TOKEN_2022_PROGRAM_ID, m.pa_lp, m.lp_mint, m.pool_authority, m.lp_amount))
    migration_event = CompletePumpAmmMigrationEvent(
        user=m.user.pubkey(),
        mint=m.mint,
        mint_amount=m.base_amount,
        sol_amount=m.quote_amount,
        pool_migration_fee=POOL_MIGRATION_FEE,
        bonding_curve=coin.bonding_curve,
        timestamp=now,
        pool=m.pool,
    )
    cpi.emit_event(call, PUMP_PROGRAM_ID, pda.event_authority_pda(), migration_event)
    tx.add(ix, call)
    _apply(state, tx, m)
    return tx


def _plan(state: FeedState, coin: Coin, tx: Tx) -> _Migration:
    """Derive every address, touch the accounts the transaction reads, and size the pool's liquidity:
    the curve's SOL less the migration fee and the rent of the accounts created, against all its tokens."""
    mint, program = coin.mint, coin.token_program
    pool_authority = pda.pool_authority_pda(mint)
    pool, pool_bump = pda.pool_pda_and_bump(0, pool_authority, mint, WSOL_MINT)
    lp_mint = pda.pool_lp_mint_pda(pool)
    pa_base = pda.associated_token_address(pool_authority, mint, program)
    pa_quote = pda.associated_token_address(pool_authority, WSOL_MINT, TOKEN_PROGRAM_ID)
    pa_lp = pda.associated_token_address(pool_authority, lp_mint, TOKEN_2022_PROGRAM_ID)
    pool_base = pda.associated_token_address(pool, mint, program)
    pool_quote = pda.associated_token_address(pool, WSOL_MINT, TOKEN_PROGRAM_ID)
    for address in (coin.associated_bonding_curve, pa_base, pa_quote, pa_lp, pool_base, pool_quote):
        state.touch_token(tx, address)
    state.touch_wallets(tx, state.migrator.pubkey(), WITHDRAW_AUTHORITY)

    base_space = spl.TOKEN_2022_ACCOUNT_SIZE if program == TOKEN_2022_PROGRAM_ID else spl.TOKEN_ACCOUNT_SIZE
    base_amount = state.tokens[coin.associated_bonding_curve].amount
    creator = coin.curve.creator
    pool_size = len(
        encode_pool(Pool(pool_bump, 0, pool_authority, mint, WSOL_MINT, lp_mint, pool_base, pool_quote, 0, creator))
    )
    rents = (
        spl.rent_exempt_minimum(pool_size)
        + spl.rent_exempt_minimum(spl.MINT_SIZE)
        + 2 * spl.rent_exempt_minimum(base_space)
        + 2 * spl.rent_exempt_minimum(spl.TOKEN_ACCOUNT_SIZE)
        + spl.rent_exempt_minimum(spl.TOKEN_2022_ACCOUNT_SIZE)
    )
    quote_amount = coin.curve.real_sol_reserves - POOL_MIGRATION_FEE - rents
    lp_amount = math.isqrt(base_amount * quote_amount) - _MINIMUM_LIQUIDITY
    pool_state = Pool(pool_bump, 0, pool_authority, mint, WSOL_MINT, lp_mint, pool_base, pool_quote, lp_amount, creator)
    return _Migration(
        coin,
        state.migrator,
        pool_authority,
        pool,
        pool_bump,
        lp_mint,
        pa_base,
        pa_quote,
        pa_lp,
        pool_base,
        pool_quote,
        base_space,
        base_amount,
        quote_amount,
        lp_amount,
        pool_state,
    )


def _move_reserves_to_pool_authority(call: Call, m: _Migration) -> None:
    """The curve's tokens and SOL (as wSOL) go to the pool authority, which then creates the pool."""
    call.cpi(
        cpi.ata_create(
            m.pool_authority, m.pa_base, m.pool_authority, m.mint, m.program, idempotent=True, space=m.base_space
        )
    )
    call.cpi(
        cpi.ata_create(
            m.pool_authority,
            m.pa_quote,
            m.pool_authority,
            WSOL_MINT,
            TOKEN_PROGRAM_ID,
            idempotent=True,
            space=spl.TOKEN_ACCOUNT_SIZE,
        )
    )
    coin = m.coin
    call.cpi(
        cpi.token_transfer(
            m.program,
            coin.associated_bonding_curve,
            m.mint,
            m.pa_base,
            coin.bonding_curve,
            m.base_amount,
            TOKEN_DECIMALS,
        )
    )
    call.cpi(cpi.system_transfer(m.pool_authority, m.pa_quote, m.quote_amount))
    call.cpi(cpi.token_sync_native(m.pa_quote))


def _create_pool(m: _Migration, now: int) -> Call:
    """The inner PumpSwap `create_pool`: pool and LP mint accounts, the pool's token accounts, the
    liquidity moved in, LP tokens minted to the pool authority, and its CreatePoolEvent."""
    pool_size = len(encode_pool(m.pool_state))
    pool_args = CreatePoolArgs(0, m.base_amount, m.quote_amount, m.coin.curve.creator)
    pool_metas = create_pool_accounts(0, m.pool_authority, m.mint, WSOL_MINT, m.program)
    amm = Call(PUMP_AMM_PROGRAM_ID, [meta.pubkey for meta in pool_metas], encode_create_pool(pool_args), units=38_000)
    amm.log("Program log: Instruction: CreatePool")
    amm.cpi(
        cpi.system_create_account(
            m.pool_authority, m.pool, spl.rent_exempt_minimum(pool_size), pool_size, PUMP_AMM_PROGRAM_ID
        )
    )
    amm.cpi(
        cpi.system_create_account(
            m.pool_authority, m.lp_mint, spl.rent_exempt_minimum(spl.MINT_SIZE), spl.MINT_SIZE, TOKEN_2022_PROGRAM_ID
        )
    )
    amm.cpi(cpi.token_initialize_mint2(TOKEN_2022_PROGRAM_ID, m.lp_mint, _LP_DECIMALS, m.pool))
    amm.cpi(
        cpi.ata_create(m.pool_authority, m.pool_base, m.pool, m.mint, m.program, idempotent=False, space=m.base_space)
    )
    amm.cpi(
        cpi.ata_create(
            m.pool_authority,
            m.pool_quote,
            m.pool,
            WSOL_MINT,
            TOKEN_PROGRAM_ID,
            idempotent=False,
            space=spl.TOKEN_ACCOUNT_SIZE,
        )
    )
    amm.cpi(
        cpi.ata_create(
            m.pool_authority,
            m.pa_lp,
            m.pool_authority,
            m.lp_mint,
            TOKEN_2022_PROGRAM_ID,
            idempotent=False,
            space=spl.TOKEN_2022_ACCOUNT_SIZE,
        )
    )
    amm.cpi(
        cpi.token_transfer(m.program, m.pa_base, m.mint, m.pool_base, m.pool_authority, m.base_amount, TOKEN_DECIMALS)
    )
    amm.cpi(
        cpi.token_transfer(
            TOKEN_PROGRAM_ID, m.pa_quote, WSOL_MINT, m.pool_quote, m.pool_authority, m.quote_amount, _WSOL_DECIMALS
        )
    )
    amm.cpi(cpi.token_mint_to(TOKEN_2022_PROGRAM_ID, m.lp_mint, m.pa_lp, m.pool, m.lp_amount))
    pool_event = CreatePoolEvent(
        timestamp=now,
        index=0,
        creator=m.pool_authority,
        base_mint=m.mint,
        quote_mint=WSOL_MINT,
        base_mint_decimals=TOKEN_DECIMALS,
        quote_mint_decimals=_WSOL_DECIMALS,
        base_amount_in=m.base_amount,
        quote_amount_in=m.quote_amount,
        pool_base_amount=m.base_amount,
        pool_quote_amount=m.quote_amount,
        minimum_liquidity=_MINIMUM_LIQUIDITY,
        initial_liquidity=m.lp_amount + _MINIMUM_LIQUIDITY,
        lp_token_amount_out=m.lp_amount,
        pool_bump=m.pool_bump,
        pool=m.pool,
        lp_mint=m.lp_mint,
        user_base_token_account=m.pa_base,
        user_quote_token_account=m.pa_quote,
        coin_creator=m.coin.curve.creator,
    )
    cpi.emit_event(amm, PUMP_AMM_PROGRAM_ID, pda.amm_event_authority_pda(), pool_event)
    return amm


def _apply(state: FeedState, tx: Tx, m: _Migration) -> None:
    """State after: the curve keeps only its rent, the pool holds the liquidity, the LP tokens are burned."""
    coin, mint, program = m.coin, m.mint, m.program
    state.credit(WITHDRAW_AUTHORITY, POOL_MIGRATION_FEE)
    drained = CurveReserves(coin.curve.virtual_token_reserves, coin.curve.virtual_sol_reserves, 0, 0)
    coin.curve = coin.curve.with_reserves(drained)
    tx.curves[coin.bonding_curve] = coin.curve
    state.tokens[coin.associated_bonding_curve].amount = 0
    state.tokens[m.pa_base] = TokenAccount(mint, m.pool_authority, program, TOKEN_DECIMALS, 0)
    wsol_reserve = spl.rent_exempt_minimum(spl.TOKEN_ACCOUNT_SIZE)
    state.tokens[m.pa_quote] = TokenAccount(
        WSOL_MINT, m.pool_authority, TOKEN_PROGRAM_ID, _WSOL_DECIMALS, 0, wsol_reserve
    )
    state.tokens[m.pa_lp] = TokenAccount(m.lp_mint, m.pool_authority, TOKEN_2022_PROGRAM_ID, _LP_DECIMALS, 0)
    state.tokens[m.pool_base] = TokenAccount(mint, m.pool, program, TOKEN_DECIMALS, m.base_amount)
    state.tokens[m.pool_quote] = TokenAccount(
        WSOL_MINT, m.pool, TOKEN_PROGRAM_ID, _WSOL_DECIMALS, m.quote_amount, wsol_reserve
    )
    pool_size = len(encode_pool(m.pool_state))
    tx.extra[m.pool] = Account(
        spl.rent_exempt_minimum(pool_size), encode_pool(m.pool_state), PUMP_AMM_PROGRAM_ID, False, RENT_EPOCH_EXEMPT
    )
    lp_mint_data = spl.pack_mint(0, _LP_DECIMALS, mint_authority=m.pool)
    tx.extra[m.lp_mint] = Account(
        spl.rent_exempt_minimum(spl.MINT_SIZE), lp_mint_data, TOKEN_2022_PROGRAM_ID, False, RENT_EPOCH_EXEMPT
    )
    tx.forget_mints += [mint, m.lp_mint, WSOL_MINT]

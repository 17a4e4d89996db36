"""Graduation: pump `migrate` of a completed curve into PumpSwap pool 0, with `create_pool` as its inner
CPI, as on mainnet (the account order and LP-mint details are the assumptions listed in devnode.feed).
"""

from __future__ import annotations

import math
from typing import Final

from solders.account import Account

from devnode.feed.state import RENT_EPOCH_EXEMPT, Coin, FeedState, TokenAccount, Tx, top_call
from devnode.pump import cpi, pda, spl
from devnode.pump.accounts import POOL_MIGRATION_FEE, TOKEN_DECIMALS, Pool, encode_pool
from devnode.pump.curve import CurveReserves
from devnode.pump.events import CompletePumpAmmMigrationEvent, CreatePoolEvent
from devnode.pump.ids import PUMP_AMM_PROGRAM_ID, PUMP_PROGRAM_ID, TOKEN_2022_PROGRAM_ID, TOKEN_PROGRAM_ID, WSOL_MINT
from devnode.pump.instructions import (
    WITHDRAW_AUTHORITY,
    CreatePoolArgs,
    create_pool_accounts,
    encode_create_pool,
    migrate_instruction,
)
from devnode.pump.trace import Call

_WSOL_DECIMALS: Final = 9
_LP_DECIMALS: Final = 9
_MINIMUM_LIQUIDITY: Final = 100


def migrate(state: FeedState, coin: Coin, now: int) -> Tx:
    """pump `migrate`: the completed curve's tokens and SOL seed PumpSwap pool 0 (mint/wSOL), created by
    CPI to `create_pool` with `pool_authority` as creator; the LP tokens are burned."""
    user = state.migrator
    mint, program = coin.mint, coin.token_program
    tx = Tx("migrate", user)
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
    state.touch_wallets(tx, user.pubkey(), WITHDRAW_AUTHORITY)

    base_space = spl.TOKEN_2022_ACCOUNT_SIZE if program == TOKEN_2022_PROGRAM_ID else spl.TOKEN_ACCOUNT_SIZE
    base_amount = state.tokens[coin.associated_bonding_curve].amount
    pool_state = Pool(
        pool_bump, 0, pool_authority, mint, WSOL_MINT, lp_mint, pool_base, pool_quote, 0, coin.curve.creator
    )
    pool_size = len(encode_pool(pool_state))
    rents = (
        spl.rent_exempt_minimum(pool_size)
        + spl.rent_exempt_minimum(spl.MINT_SIZE)
        + 2 * spl.rent_exempt_minimum(base_space)
        + 2 * spl.rent_exempt_minimum(spl.TOKEN_ACCOUNT_SIZE)
        + spl.rent_exempt_minimum(spl.TOKEN_2022_ACCOUNT_SIZE)
    )
    quote_amount = coin.curve.real_sol_reserves - POOL_MIGRATION_FEE - rents
    lp_amount = math.isqrt(base_amount * quote_amount) - _MINIMUM_LIQUIDITY
    pool_state = Pool(
        pool_bump, 0, pool_authority, mint, WSOL_MINT, lp_mint, pool_base, pool_quote, lp_amount, coin.curve.creator
    )

    ix = migrate_instruction(mint, user.pubkey(), program)
    call = top_call(ix, state.rng.randint(55_000, 70_000)).log("Program log: Instruction: Migrate")
    call.cpi(cpi.ata_create(pool_authority, pa_base, pool_authority, mint, program, idempotent=True, space=base_space))
    call.cpi(
        cpi.ata_create(
            pool_authority,
            pa_quote,
            pool_authority,
            WSOL_MINT,
            TOKEN_PROGRAM_ID,
            idempotent=True,
            space=spl.TOKEN_ACCOUNT_SIZE,
        )
    )
    call.cpi(
        cpi.token_transfer(
            program, coin.associated_bonding_curve, mint, pa_base, coin.bonding_curve, base_amount, TOKEN_DECIMALS
        )
    )
    call.cpi(cpi.system_transfer(pool_authority, pa_quote, quote_amount))
    call.cpi(cpi.token_sync_native(pa_quote))

    pool_args = CreatePoolArgs(0, base_amount, quote_amount, coin.curve.creator)
    pool_metas = create_pool_accounts(0, pool_authority, mint, WSOL_MINT, program)
    amm = Call(PUMP_AMM_PROGRAM_ID, [m.pubkey for m in pool_metas], encode_create_pool(pool_args), units=38_000)
    amm.log("Program log: Instruction: CreatePool")
    amm.cpi(
        cpi.system_create_account(
            pool_authority, pool, spl.rent_exempt_minimum(pool_size), pool_size, PUMP_AMM_PROGRAM_ID
        )
    )
    amm.cpi(
        cpi.system_create_account(
            pool_authority, lp_mint, spl.rent_exempt_minimum(spl.MINT_SIZE), spl.MINT_SIZE, TOKEN_2022_PROGRAM_ID
        )
    )
    amm.cpi(cpi.token_initialize_mint2(TOKEN_2022_PROGRAM_ID, lp_mint, _LP_DECIMALS, pool))
    amm.cpi(cpi.ata_create(pool_authority, pool_base, pool, mint, program, idempotent=False, space=base_space))
    amm.cpi(
        cpi.ata_create(
            pool_authority,
            pool_quote,
            pool,
            WSOL_MINT,
            TOKEN_PROGRAM_ID,
            idempotent=False,
            space=spl.TOKEN_ACCOUNT_SIZE,
        )
    )
    amm.cpi(
        cpi.ata_create(
            pool_authority,
            pa_lp,
            pool_authority,
            lp_mint,
            TOKEN_2022_PROGRAM_ID,
            idempotent=False,
            space=spl.TOKEN_2022_ACCOUNT_SIZE,
        )
    )
    amm.cpi(cpi.token_transfer(program, pa_base, mint, pool_base, pool_authority, base_amount, TOKEN_DECIMALS))
    amm.cpi(
        cpi.token_transfer(
            TOKEN_PROGRAM_ID, pa_quote, WSOL_MINT, pool_quote, pool_authority, quote_amount, _WSOL_DECIMALS
        )
    )
    amm.cpi(cpi.token_mint_to(TOKEN_2022_PROGRAM_ID, lp_mint, pa_lp, pool, lp_amount))
    pool_event = CreatePoolEvent(
        timestamp=now,
        index=0,
        creator=pool_authority,
        base_mint=mint,
        quote_mint=WSOL_MINT,
        base_mint_decimals=TOKEN_DECIMALS,
        quote_mint_decimals=_WSOL_DECIMALS,
        base_amount_in=base_amount,
        quote_amount_in=quote_amount,
        pool_base_amount=base_amount,
        pool_quote_amount=quote_amount,
        minimum_liquidity=_MINIMUM_LIQUIDITY,
        initial_liquidity=lp_amount + _MINIMUM_LIQUIDITY,
        lp_token_amount_out=lp_amount,
        pool_bump=pool_bump,
        pool=pool,
        lp_mint=lp_mint,
        user_base_token_account=pa_base,
        user_quote_token_account=pa_quote,
        coin_creator=coin.curve.creator,
    )
    cpi.emit_event(amm, PUMP_AMM_PROGRAM_ID, pda.amm_event_authority_pda(), pool_event)
    call.cpi(amm)
    call.cpi(cpi.token_burn(TOKEN_2022_PROGRAM_ID, pa_lp, lp_mint, pool_authority, lp_amount))
    migration_event = CompletePumpAmmMigrationEvent(
        user=user.pubkey(),
        mint=mint,
        mint_amount=base_amount,
        sol_amount=quote_amount,
        pool_migration_fee=POOL_MIGRATION_FEE,
        bonding_curve=coin.bonding_curve,
        timestamp=now,
        pool=pool,
    )
    cpi.emit_event(call, PUMP_PROGRAM_ID, pda.event_authority_pda(), migration_event)
    tx.add(ix, call)

    # State after: the curve keeps only its rent, the pool holds the liquidity, the LP tokens are burned.
    state.credit(WITHDRAW_AUTHORITY, POOL_MIGRATION_FEE)
    drained = CurveReserves(coin.curve.virtual_token_reserves, coin.curve.virtual_sol_reserves, 0, 0)
    coin.curve = coin.curve.with_reserves(drained)
    tx.curves[coin.bonding_curve] = coin.curve
    state.tokens[coin.associated_bonding_curve].amount = 0
    state.tokens[pa_base] = TokenAccount(mint, pool_authority, program, TOKEN_DECIMALS, 0)
    wsol_reserve = spl.rent_exempt_minimum(spl.TOKEN_ACCOUNT_SIZE)
    state.tokens[pa_quote] = TokenAccount(WSOL_MINT, pool_authority, TOKEN_PROGRAM_ID, _WSOL_DECIMALS, 0, wsol_reserve)
    state.tokens[pa_lp] = TokenAccount(lp_mint, pool_authority, TOKEN_2022_PROGRAM_ID, _LP_DECIMALS, 0)
    state.tokens[pool_base] = TokenAccount(mint, pool, program, TOKEN_DECIMALS, base_amount)
    state.tokens[pool_quote] = TokenAccount(
        WSOL_MINT, pool, TOKEN_PROGRAM_ID, _WSOL_DECIMALS, quote_amount, wsol_reserve
    )
    tx.extra[pool] = Account(
        spl.rent_exempt_minimum(pool_size), encode_pool(pool_state), PUMP_AMM_PROGRAM_ID, False, RENT_EPOCH_EXEMPT
    )
    lp_mint_data = spl.pack_mint(0, _LP_DECIMALS, mint_authority=pool)
    tx.extra[lp_mint] = Account(
        spl.rent_exempt_minimum(spl.MINT_SIZE), lp_mint_data, TOKEN_2022_PROGRAM_ID, False, RENT_EPOCH_EXEMPT
    )
    tx.forget_mints += [mint, lp_mint, WSOL_MINT]
    return tx

"""Coin creation: pump `create` (SPL Token mint + Metaplex metadata) and `create_v2` (Token-2022 mint
with MetadataPointer + TokenMetadata, optionally quoted in wrapped SOL or USDC), with the creator's
optional first buy in the same transaction. Of the `create_v2`s passing wrapped SOL, some make a SOL coin (as
on mainnet) and some a curve whose own quote mint is wrapped SOL (see the package docstring).
"""

from __future__ import annotations

from typing import Final

import base58
from solders.account import Account
from solders.keypair import Keypair
from solders.pubkey import Pubkey

from devnode.feed.state import RENT_EPOCH_EXEMPT, RESERVE, Coin, FeedState, TokenAccount, Tx, top_call
from devnode.feed.trade import append_buy
from pumpfun import cpi, pda, spl
from pumpfun.accounts import BONDING_CURVE_ACCOUNT_SIZE, TOKEN_DECIMALS, TOKEN_TOTAL_SUPPLY, BondingCurve
from pumpfun.curve import buy_tokens_out
from pumpfun.events import CreateEvent
from pumpfun.ids import PUMP_PROGRAM_ID, TOKEN_2022_PROGRAM_ID, TOKEN_PROGRAM_ID, USDC_MINT, WSOL_MINT
from pumpfun.instructions import CreateArgs, CreateV2Args, QuoteAccounts, create_instruction, create_v2_instruction

#: Assumption: 4,000 USDC (6 decimals) of virtual quote reserves for a USDC-paired curve.
USDC_INITIAL_VIRTUAL_QUOTE_RESERVES: Final = 4_000_000_000
_USDC_DECIMALS: Final = 6

_ADJECTIVES: Final = (
    "Based", "Tiny", "Giga", "Sleepy", "Angry", "Golden", "Cosmic", "Frozen", "Lucky", "Turbo",
    "Silent", "Pixel", "Hyper", "Baby", "Wild", "Retro", "Moon", "Dark", "Happy", "Degen",
)  # fmt: skip
_NOUNS: Final = (
    "Cat", "Frog", "Dog", "Penguin", "Hamster", "Whale", "Goblin", "Rocket", "Banana", "Wizard",
    "Otter", "Pepe", "Shiba", "Duck", "Bull", "Bear", "Cactus", "Robot", "Ape", "Llama",
)  # fmt: skip


def _coin_metadata(state: FeedState) -> tuple[str, str, str]:
    adjective, noun = state.rng.choice(_ADJECTIVES), state.rng.choice(_NOUNS)
    name = f"{adjective} {noun}"
    symbol = (adjective[0] + noun).upper()[:10]
    cid = base58.b58encode(bytes([0x12, 0x20]) + state.rng.randbytes(32)).decode()  # a CIDv0: sha2-256 multihash
    return name, symbol, f"https://ipfs.io/ipfs/{cid}"


def create(state: FeedState, now: int) -> Tx:
    user = state.pick_trader()
    mint_kp = state.new_mint()
    name, symbol, uri = _coin_metadata(state)
    coin: Coin | None
    if state.rng.random() < 0.45:
        tx, coin = _create_classic(state, user, mint_kp, name, symbol, uri, now)
    else:
        quote_roll = state.rng.random()
        quote = None if quote_roll < 0.6 else WSOL_MINT if quote_roll < 0.88 else USDC_MINT
        wsol_curve = quote_roll >= 0.75 and quote == WSOL_MINT  # wSOL as the curve's own quote mint
        tx, coin = _create_v2(state, user, mint_kp, name, symbol, uri, quote, now, wsol_curve=wsol_curve)
    if coin is not None:
        state.coins[coin.mint] = coin
        if state.rng.random() < 0.5:  # the creator's own first buy, in the same transaction
            sol_in = min(state.sol_amount(0.05, 3.0), state.balance(user.pubkey()) - RESERVE)
            tokens = buy_tokens_out(coin.curve.reserves, sol_in, state.fee_rates(coin.curve))
            if tokens > 0:
                append_buy(state, tx, coin, user, tokens, now)
        state.forget_oldest()
    return tx


def _create_event(
    coin_mint: Pubkey,
    curve: BondingCurve,
    user: Pubkey,
    token_program: Pubkey,
    name: str,
    symbol: str,
    uri: str,
    now: int,
) -> CreateEvent:
    return CreateEvent(
        name=name,
        symbol=symbol,
        uri=uri,
        mint=coin_mint,
        bonding_curve=pda.bonding_curve_pda(coin_mint),
        user=user,
        creator=curve.creator,
        timestamp=now,
        virtual_token_reserves=curve.virtual_token_reserves,
        virtual_sol_reserves=curve.virtual_sol_reserves,
        real_token_reserves=curve.real_token_reserves,
        token_total_supply=curve.token_total_supply,
        token_program=token_program,
        is_mayhem_mode=curve.is_mayhem_mode,
        is_cashback_enabled=curve.is_cashback_coin,
        quote_mint=curve.quote_mint,
        virtual_quote_reserves=curve.virtual_sol_reserves,
    )


def _create_classic(
    state: FeedState, user_kp: Keypair, mint_kp: Keypair, name: str, symbol: str, uri: str, now: int
) -> tuple[Tx, Coin]:
    user, mint = user_kp.pubkey(), mint_kp.pubkey()
    tx = Tx("create", user_kp)
    tx.signers.append(mint_kp)
    bonding_curve = pda.bonding_curve_pda(mint)
    abc = pda.associated_bonding_curve_pda(mint, TOKEN_PROGRAM_ID)
    mint_authority = pda.mint_authority_pda()
    curve = BondingCurve.new(user)
    mint_data = spl.pack_mint(TOKEN_TOTAL_SUPPLY, TOKEN_DECIMALS)
    rent_mint = spl.rent_exempt_minimum(len(mint_data))
    rent_curve = spl.rent_exempt_minimum(BONDING_CURVE_ACCOUNT_SIZE)

    ix = create_instruction(mint, user, CreateArgs(name, symbol, uri, user))
    call = top_call(ix, state.rng.randint(38_000, 46_000)).log("Program log: Instruction: Create")
    call.cpi(cpi.system_create_account(user, mint, rent_mint, len(mint_data), TOKEN_PROGRAM_ID))
    call.cpi(cpi.token_initialize_mint2(TOKEN_PROGRAM_ID, mint, TOKEN_DECIMALS, mint_authority))
    call.cpi(cpi.system_create_account(user, bonding_curve, rent_curve, BONDING_CURVE_ACCOUNT_SIZE, PUMP_PROGRAM_ID))
    call.cpi(
        cpi.ata_create(user, abc, bonding_curve, mint, TOKEN_PROGRAM_ID, idempotent=False, space=spl.TOKEN_ACCOUNT_SIZE)
    )
    call.cpi(
        cpi.metaplex_create_metadata_v3(pda.metaplex_metadata_pda(mint), mint, mint_authority, user, name, symbol, uri)
    )
    call.cpi(cpi.token_mint_to(TOKEN_PROGRAM_ID, mint, abc, mint_authority, TOKEN_TOTAL_SUPPLY))
    call.cpi(cpi.token_revoke_mint_authority(TOKEN_PROGRAM_ID, mint, mint_authority))
    event = _create_event(mint, curve, user, TOKEN_PROGRAM_ID, name, symbol, uri, now)
    cpi.emit_event(call, PUMP_PROGRAM_ID, pda.event_authority_pda(), event)
    tx.add(ix, call)

    state.touch_token(tx, abc)
    state.debit(user, rent_mint + rent_curve + spl.rent_exempt_minimum(spl.TOKEN_ACCOUNT_SIZE))
    state.tokens[abc] = TokenAccount(mint, bonding_curve, TOKEN_PROGRAM_ID, TOKEN_DECIMALS, TOKEN_TOTAL_SUPPLY)
    tx.extra[mint] = Account(rent_mint, mint_data, TOKEN_PROGRAM_ID, False, RENT_EPOCH_EXEMPT)
    tx.curves[bonding_curve] = curve
    coin = Coin(mint, "create", TOKEN_PROGRAM_ID, curve, bonding_curve, abc)
    return tx, coin


def _create_v2(
    state: FeedState,
    user_kp: Keypair,
    mint_kp: Keypair,
    name: str,
    symbol: str,
    uri: str,
    quote: Pubkey | None,
    now: int,
    *,
    wsol_curve: bool = False,
) -> tuple[Tx, Coin | None]:
    user, mint = user_kp.pubkey(), mint_kp.pubkey()
    tx = Tx("create_v2", user_kp)
    tx.signers.append(mint_kp)
    bonding_curve = pda.bonding_curve_pda(mint)
    abc = pda.associated_bonding_curve_pda(mint, TOKEN_2022_PROGRAM_ID)
    mint_authority = pda.mint_authority_pda()
    usdc = quote == USDC_MINT
    quoted = usdc or wsol_curve  # a curve with a quote mint of its own, traded through buy_v2/sell_v2
    if usdc:
        curve = BondingCurve.new(user, quote_mint=USDC_MINT, virtual_quote_reserves=USDC_INITIAL_VIRTUAL_QUOTE_RESERVES)
    elif wsol_curve:
        curve = BondingCurve.new(user, quote_mint=WSOL_MINT)
    else:
        curve = BondingCurve.new(user)  # wrapped SOL passed as the quote still makes a SOL coin
    mint_data = spl.pack_mint_2022_with_metadata(
        mint, TOKEN_TOTAL_SUPPLY, TOKEN_DECIMALS, name, symbol, uri, update_authority=mint_authority
    )
    rent_mint = spl.rent_exempt_minimum(len(mint_data))
    rent_curve = spl.rent_exempt_minimum(BONDING_CURVE_ACCOUNT_SIZE)
    rent_total = rent_mint + rent_curve + spl.rent_exempt_minimum(spl.TOKEN_2022_ACCOUNT_SIZE)
    quote_accounts = QuoteAccounts(quote) if quote is not None else None

    ix = create_v2_instruction(mint, user, CreateV2Args(name, symbol, uri, user), quote_accounts)
    call = top_call(ix, state.rng.randint(45_000, 60_000)).log("Program log: Instruction: CreateV2")
    call.cpi(cpi.system_create_account(user, mint, rent_mint, len(mint_data), TOKEN_2022_PROGRAM_ID))
    call.cpi(cpi.metadata_pointer_initialize(mint, None))
    call.cpi(cpi.token_initialize_mint2(TOKEN_2022_PROGRAM_ID, mint, TOKEN_DECIMALS, mint_authority))
    call.cpi(cpi.token_metadata_initialize(mint, mint_authority, mint_authority, name, symbol, uri))
    call.cpi(cpi.system_create_account(user, bonding_curve, rent_curve, BONDING_CURVE_ACCOUNT_SIZE, PUMP_PROGRAM_ID))
    call.cpi(
        cpi.ata_create(
            user,
            abc,
            bonding_curve,
            mint,
            TOKEN_2022_PROGRAM_ID,
            idempotent=False,
            space=spl.TOKEN_2022_ACCOUNT_SIZE,
        )
    )
    state.touch_token(tx, abc)
    if quoted and quote is not None and quote_accounts is not None:
        aqbc = quote_accounts.associated_quote_bonding_curve(mint)
        call.cpi(
            cpi.ata_create(
                user,
                aqbc,
                bonding_curve,
                quote,
                TOKEN_PROGRAM_ID,
                idempotent=True,
                space=spl.TOKEN_ACCOUNT_SIZE,
            )
        )
        state.touch_token(tx, aqbc)
        state.tokens[aqbc] = (
            TokenAccount(USDC_MINT, bonding_curve, TOKEN_PROGRAM_ID, _USDC_DECIMALS, 0)
            if usdc
            else TokenAccount(
                WSOL_MINT, bonding_curve, TOKEN_PROGRAM_ID, 9, 0, spl.rent_exempt_minimum(spl.TOKEN_ACCOUNT_SIZE)
            )
        )
        rent_total += spl.rent_exempt_minimum(spl.TOKEN_ACCOUNT_SIZE)
    call.cpi(cpi.token_mint_to(TOKEN_2022_PROGRAM_ID, mint, abc, mint_authority, TOKEN_TOTAL_SUPPLY))
    call.cpi(cpi.token_revoke_mint_authority(TOKEN_2022_PROGRAM_ID, mint, mint_authority))
    event = _create_event(mint, curve, user, TOKEN_2022_PROGRAM_ID, name, symbol, uri, now)
    cpi.emit_event(call, PUMP_PROGRAM_ID, pda.event_authority_pda(), event)
    tx.add(ix, call)

    state.debit(user, rent_total)
    state.tokens[abc] = TokenAccount(mint, bonding_curve, TOKEN_2022_PROGRAM_ID, TOKEN_DECIMALS, TOKEN_TOTAL_SUPPLY)
    tx.extra[mint] = Account(rent_mint, mint_data, TOKEN_2022_PROGRAM_ID, False, RENT_EPOCH_EXEMPT)
    tx.curves[bonding_curve] = curve
    if quoted:  # not traded by this feed (see the module docstring): written once, then forgotten
        tx.forget_mints += [mint, quote or USDC_MINT]
        return tx, None
    return tx, Coin(mint, "create_v2", TOKEN_2022_PROGRAM_ID, curve, bonding_curve, abc)

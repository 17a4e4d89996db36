"""Generated launch-platform traffic for the local chain: pump.fun-shaped transactions.

This is GENERATED traffic, not recorded mainnet data. A seeded random stream of coin creations, trades and
graduations is built here and handed to the chain as `InjectedTransaction`s, so that signals, webhooks,
log subscriptions and the gRPC stream have launch-platform traffic offline.

What is real:
  * program ids, PDAs and every derived address (bonding curves, associated token accounts, creator
    vaults, event authorities, PumpSwap pools and LP mints) — derived exactly as on mainnet;
  * instruction data (Anchor discriminators + Borsh args) and account orders of pump `create`, `create_v2`,
    `buy`, `sell`, `migrate` and PumpSwap `create_pool` (the inner CPI of `migrate`, as on mainnet);
  * account layouts: pump BondingCurve (150 bytes, documented offsets) and Global, PumpSwap Pool, SPL mints
    (82 bytes) and token accounts (165 bytes), Token-2022 mints with MetadataPointer + TokenMetadata and
    Token-2022 token accounts with ImmutableOwner;
  * Anchor events (CreateEvent, TradeEvent, CompleteEvent, CompletePumpAmmMigrationEvent, CreatePoolEvent)
    as `emit_cpi!` self-CPIs in the inner instructions and as `Program data:` log lines;
  * the curve math (integers, protocol 95 bps + creator 30 bps) that sets every amount and reserve;
  * the transactions themselves: v0 messages compiled against the chain's latest blockhash and really
    signed by generated keypairs (fee payer = the user; the mint keypair also signs creates).

What is synthetic:
  * the pump, PumpSwap, Metaplex and mayhem programs are NOT executed: their effects are computed here
    and the resulting account states are written directly (`account_writes`); logs, inner instructions
    and compute units describe what the programs would have done (figures are typical, not measured);
  * wallets, coin names, symbols and metadata URIs, amounts, timing and priority fees are random draws
    from a `random.Random(seed)`; mints are plain generated keypairs (no "...pump" vanity suffix);
  * accounts the stream does not need are not written: Metaplex metadata, user/global volume
    accumulators, bonding_curve_v2, mayhem state, fee config;
  * coins quoted in USDC are created (create_v2 with the quote remaining accounts) but never traded (their
    trades use buy_v2/sell_v2, whose account tables are not modelled); coins created with wrapped SOL as
    the explicit quote are SOL coins (`quote_mint` stays `Pubkey::default()`, as the docs say) and trade;
  * the USDC curve's initial virtual quote reserves are an assumption (`USDC_INITIAL_VIRTUAL_QUOTE_RESERVES`);
  * graduation: `migrate`'s 24-account order comes from public copies of the pump IDL (it is not in the
    reference); for Token-2022 coins SPL Token is appended as a remaining account (see `migrate_accounts`);
    the LP mint's 9 decimals and the migration fee going to `Global.withdraw_authority` are assumptions;
  * no mayhem-mode or cashback coins, buyback fee 0; the `Global` account is written (documented example
    values, fees 95 + 30 bps) by the first transaction of each run;
  * traders are funded by one airdrop each, plus another whenever one falls below 100 SOL; a restarted feed
    with the same seed replays the same wallets and mints and overwrites their accounts.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import random
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Final, Literal, Protocol

import base58
from solders.account import Account
from solders.compute_budget import set_compute_unit_limit, set_compute_unit_price
from solders.hash import Hash
from solders.instruction import AccountMeta, Instruction
from solders.keypair import Keypair
from solders.message import MessageV0
from solders.pubkey import Pubkey
from solders.signature import Signature
from solders.transaction import VersionedTransaction

from devnode.injected import InjectedTransaction
from devnode.pump import cpi, pda, spl
from devnode.pump.accounts import (
    BONDING_CURVE_ACCOUNT_SIZE,
    POOL_MIGRATION_FEE,
    TOKEN_DECIMALS,
    TOKEN_TOTAL_SUPPLY,
    BondingCurve,
    Global,
    Pool,
    encode_bonding_curve,
    encode_global,
    encode_pool,
)
from devnode.pump.curve import (
    CREATOR_FEE_BPS,
    PROTOCOL_FEE_BPS,
    CurveReserves,
    buy_quote,
    buy_tokens_out,
    sell_quote,
)
from devnode.pump.events import (
    CompleteEvent,
    CompletePumpAmmMigrationEvent,
    CreateEvent,
    CreatePoolEvent,
    TradeEvent,
)
from devnode.pump.ids import (
    ASSOCIATED_TOKEN_PROGRAM_ID,
    BUYBACK_FEE_RECIPIENTS,
    FEE_RECIPIENTS,
    PUMP_AMM_PROGRAM_ID,
    PUMP_PROGRAM_ID,
    SYSTEM_PROGRAM_ID,
    TOKEN_2022_PROGRAM_ID,
    TOKEN_PROGRAM_ID,
    USDC_MINT,
    WSOL_MINT,
)
from devnode.pump.instructions import (
    WITHDRAW_AUTHORITY,
    BuyArgs,
    CreateArgs,
    CreatePoolArgs,
    CreateV2Args,
    QuoteAccounts,
    SellArgs,
    buy_instruction,
    create_instruction,
    create_pool_accounts,
    create_v2_instruction,
    encode_create_pool,
    migrate_instruction,
    sell_instruction,
)
from devnode.pump.trace import Call, render_trace, token_balance

__all__ = ["TRADER_COUNT", "USDC_INITIAL_VIRTUAL_QUOTE_RESERVES", "ChainLike", "LaunchFeed"]

logger = logging.getLogger(__name__)

LAMPORTS_PER_SOL: Final = 1_000_000_000
TRADER_COUNT: Final = 24
TRADER_AIRDROP_LAMPORTS: Final = 2_000 * LAMPORTS_PER_SOL
#: A trader below this balance gets another airdrop (so a long-running feed never runs dry).
_TOP_UP_BELOW: Final = 100 * LAMPORTS_PER_SOL
#: Lamports a trader keeps aside for fees and rent when sizing a buy.
_RESERVE: Final = LAMPORTS_PER_SOL // 20
#: Coins still traded; older ones stop trading (and leave the feed's memory), as most pump coins do.
MAX_LIVE_COINS: Final = 40
#: Assumption: 4,000 USDC (6 decimals) of virtual quote reserves for a USDC-paired curve.
USDC_INITIAL_VIRTUAL_QUOTE_RESERVES: Final = 4_000_000_000
_USDC_DECIMALS: Final = 6
_WSOL_DECIMALS: Final = 9
_LP_DECIMALS: Final = 9
_MINIMUM_LIQUIDITY: Final = 100
_RENT_EPOCH_EXEMPT: Final = 2**64 - 1
_SIGNATURE_FEE: Final = 5_000
_CU_LIMITS: Final = (72_000, 100_000, 120_000, 150_000, 200_000, 250_000, 300_000, 400_000, 600_000, 1_400_000)
_MAX_SEEN_SIGNATURES: Final = 50_000

_ADJECTIVES: Final = (
    "Based", "Tiny", "Giga", "Sleepy", "Angry", "Golden", "Cosmic", "Frozen", "Lucky", "Turbo",
    "Silent", "Pixel", "Hyper", "Baby", "Wild", "Retro", "Moon", "Dark", "Happy", "Degen",
)  # fmt: skip
_NOUNS: Final = (
    "Cat", "Frog", "Dog", "Penguin", "Hamster", "Whale", "Goblin", "Rocket", "Banana", "Wizard",
    "Otter", "Pepe", "Shiba", "Duck", "Bull", "Bear", "Cactus", "Robot", "Ape", "Llama",
)  # fmt: skip


class ChainLike(Protocol):
    """What the feed needs from the chain (devnode.chain.Chain provides it)."""

    @property
    def slot(self) -> int: ...

    def inject(self, tx: InjectedTransaction) -> Signature: ...

    def latest_blockhash(self) -> Hash: ...

    def get_account(self, pubkey: Pubkey) -> Account | None: ...

    def airdrop(self, pubkey: Pubkey, lamports: int) -> object: ...


@dataclass
class _Coin:
    mint: Pubkey
    kind: Literal["create", "create_v2"]
    token_program: Pubkey
    curve: BondingCurve
    bonding_curve: Pubkey
    associated_bonding_curve: Pubkey


@dataclass
class _TokenAccount:
    mint: Pubkey
    owner: Pubkey
    program: Pubkey
    decimals: int
    amount: int
    native_reserve: int | None = None  # set on wrapped-SOL accounts

    @property
    def size(self) -> int:
        return spl.TOKEN_2022_ACCOUNT_SIZE if self.program == TOKEN_2022_PROGRAM_ID else spl.TOKEN_ACCOUNT_SIZE

    def to_account(self) -> Account:
        state = spl.TokenAccountState(self.mint, self.owner, self.amount, self.native_reserve)
        if self.program == TOKEN_2022_PROGRAM_ID:
            data = spl.pack_token_account_2022(state)
        else:
            data = spl.pack_token_account(state)
        lamports = spl.rent_exempt_minimum(len(data)) + (self.amount if self.native_reserve is not None else 0)
        return Account(lamports, data, self.program, False, _RENT_EPOCH_EXEMPT)


class _Tx:
    """A transaction being assembled: top-level instructions with their described execution, and the
    accounts it touches (their pre-state is captured at first touch)."""

    def __init__(self, kind: str, payer: Keypair) -> None:
        self.kind = kind
        self.payer = payer
        self.signers: list[Keypair] = [payer]
        self.instructions: list[Instruction] = []
        self.calls: list[Call] = []
        self.wallets: dict[Pubkey, None] = {payer.pubkey(): None}
        self.tokens: dict[Pubkey, int | None] = {}  # token account -> amount before the transaction
        self.curves: dict[Pubkey, BondingCurve] = {}  # bonding curve address -> state after
        self.extra: dict[Pubkey, Account] = {}  # other accounts written as they are after
        self.forget_mints: list[Pubkey] = []  # coins the feed stops tracking once this is built

    def add(self, ix: Instruction, call: Call) -> None:
        self.instructions.append(ix)
        self.calls.append(call)


def _top_call(ix: Instruction, units: int) -> Call:
    return Call(ix.program_id, [m.pubkey for m in ix.accounts], bytes(ix.data), units=units)


def _total_units(call: Call) -> int:
    return call.units + sum(_total_units(c) for c in call.body if isinstance(c, Call))


def _system_account(lamports: int) -> Account:
    return Account(lamports, b"", SYSTEM_PROGRAM_ID, False, _RENT_EPOCH_EXEMPT)


class LaunchFeed:
    """A steady, seeded stream of pump.fun-shaped transactions injected into the chain.

    `next_transactions()` is the pure step (it only reads the chain, plus airdrops to fund the generated
    traders once); `start()` runs it every `interval_ms` and injects what it returns.
    """

    def __init__(
        self,
        chain: ChainLike,
        seed: int = 7,
        interval_ms: int = 1000,
        *,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._chain = chain
        self._rng = random.Random(seed)
        self._interval_ms = interval_ms
        self._clock = clock
        self._traders = [Keypair.from_seed(self._rng.randbytes(32)) for _ in range(TRADER_COUNT)]
        self._migrator = Keypair.from_seed(self._rng.randbytes(32))
        self._lamports: dict[Pubkey, int] = {}
        self._coins: dict[Pubkey, _Coin] = {}
        self._tokens: dict[Pubkey, _TokenAccount] = {}
        self._volume: dict[Pubkey, int] = {}
        self._graduations: list[tuple[int, Pubkey]] = []
        self._seen: dict[Signature, None] = {}
        self._step = 0
        self._funded = False
        self._global_written = False
        self._task: asyncio.Task[None] | None = None
        self.counts: Counter[str] = Counter()

    # ------------------------------------------------------------------ public

    @property
    def traders(self) -> list[Pubkey]:
        return [kp.pubkey() for kp in self._traders]

    async def start(self) -> None:
        if self._task is None or self._task.done():
            self._task = asyncio.create_task(self._run(), name="launch-feed")

    async def stop(self) -> None:
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task

    def next_transactions(self) -> list[InjectedTransaction]:
        """One step of the stream: 1-3 transactions (plus a due graduation), not yet injected."""
        self._fund_traders()
        self._step += 1
        blockhash = self._chain.latest_blockhash()
        now = int(self._clock())
        out: list[InjectedTransaction] = []
        due = [m for step, m in self._graduations if step <= self._step]
        if due:
            self._graduations = [(s, m) for s, m in self._graduations if m != due[0]]
            if due[0] in self._coins:
                out.append(self._finish(self._migrate(self._coins[due[0]], now), blockhash))
        for _ in range(self._rng.choice((1, 1, 2, 2, 3))):
            # Each transaction is finished (its writes taken) before the next one changes the state.
            tx = self._next_action(now)
            if tx is not None:
                out.append(self._finish(tx, blockhash))
        return out

    # ------------------------------------------------------------------ loop

    async def _run(self) -> None:
        while True:
            try:
                for itx in self.next_transactions():
                    try:
                        self._chain.inject(itx)
                    except Exception:
                        logger.exception("launch feed: the chain rejected an injected transaction")
            except Exception:
                # NOTE: the feed is background traffic; a bad step must not stop it.
                logger.exception("launch feed: step failed")
            await asyncio.sleep(self._interval_ms / 1000)

    # ------------------------------------------------------------------ state helpers

    def _fund_traders(self) -> None:
        if self._funded:
            return
        for kp in [*self._traders, self._migrator]:
            self._chain.airdrop(kp.pubkey(), TRADER_AIRDROP_LAMPORTS)
            account = self._chain.get_account(kp.pubkey())
            self._lamports[kp.pubkey()] = account.lamports if account is not None else TRADER_AIRDROP_LAMPORTS
        self._funded = True

    def _balance(self, pubkey: Pubkey) -> int:
        if pubkey not in self._lamports:
            account = self._chain.get_account(pubkey)
            self._lamports[pubkey] = account.lamports if account is not None else 0
        return self._lamports[pubkey]

    def _credit(self, pubkey: Pubkey, lamports: int) -> None:
        self._lamports[pubkey] = self._balance(pubkey) + lamports

    def _debit(self, pubkey: Pubkey, lamports: int) -> None:
        balance = self._balance(pubkey)
        if lamports > balance:
            raise ValueError(f"{pubkey} cannot pay {lamports} lamports (has {balance})")
        self._lamports[pubkey] = balance - lamports

    def _top_up(self, trader: Keypair) -> None:
        if self._balance(trader.pubkey()) < _TOP_UP_BELOW:
            self._chain.airdrop(trader.pubkey(), TRADER_AIRDROP_LAMPORTS)
            self._credit(trader.pubkey(), TRADER_AIRDROP_LAMPORTS)

    def _touch_token(self, tx: _Tx, address: Pubkey) -> None:
        if address not in tx.tokens:
            existing = self._tokens.get(address)
            tx.tokens[address] = existing.amount if existing is not None else None

    def _touch_wallets(self, tx: _Tx, *pubkeys: Pubkey) -> None:
        for pubkey in pubkeys:
            self._balance(pubkey)
            tx.wallets[pubkey] = None

    def _live_coins(self) -> list[_Coin]:
        return [c for c in self._coins.values() if not c.curve.complete]

    def _forget_oldest(self) -> None:
        live = self._live_coins()
        while len(live) > MAX_LIVE_COINS:
            self._forget(live.pop(0).mint)

    def _forget(self, mint: Pubkey) -> None:
        self._coins.pop(mint, None)
        for address in [a for a, t in self._tokens.items() if t.mint == mint]:
            del self._tokens[address]

    # ------------------------------------------------------------------ choosing what happens

    def _next_action(self, now: int) -> _Tx | None:
        live = self._live_coins()
        roll = self._rng.random()
        if not live or roll < 0.14:
            return self._create(now)
        coin = self._pick_coin(live)
        if roll < 0.15:
            return self._whale_buy(coin, now)
        holdings = [
            t for t in self._tokens.values() if t.mint == coin.mint and t.amount > 0 and t.owner != coin.bonding_curve
        ]
        if roll < 0.6 or not holdings:
            return self._buy(coin, now)
        return self._sell(coin, self._rng.choice(holdings), now)

    def _pick_coin(self, live: list[_Coin]) -> _Coin:
        recent = live[-12:]
        return self._rng.choices(recent, weights=[i + 1 for i in range(len(recent))])[0]

    def _pick_trader(self) -> Keypair:
        trader = self._rng.choice(self._traders)
        self._top_up(trader)
        return trader

    def _coin_metadata(self) -> tuple[str, str, str]:
        adjective, noun = self._rng.choice(_ADJECTIVES), self._rng.choice(_NOUNS)
        name = f"{adjective} {noun}"
        symbol = (adjective[0] + noun).upper()[:10]
        cid = base58.b58encode(bytes([0x12, 0x20]) + self._rng.randbytes(32)).decode()  # a CIDv0: sha2-256 multihash
        return name, symbol, f"https://ipfs.io/ipfs/{cid}"

    def _slippage(self) -> float:
        return self._rng.choice((0.01, 0.05, 0.1, 0.15, 0.25, 0.5))

    def _sol_amount(self, low_sol: float, high_sol: float) -> int:
        return int(10 ** self._rng.uniform(math.log10(low_sol), math.log10(high_sol)) * LAMPORTS_PER_SOL)

    # ------------------------------------------------------------------ create / create_v2

    def _create(self, now: int) -> _Tx:
        user = self._pick_trader()
        mint_kp = Keypair.from_seed(self._rng.randbytes(32))
        name, symbol, uri = self._coin_metadata()
        coin: _Coin | None
        if self._rng.random() < 0.45:
            tx, coin = self._create_classic(user, mint_kp, name, symbol, uri, now)
        else:
            quote_roll = self._rng.random()
            quote = None if quote_roll < 0.7 else WSOL_MINT if quote_roll < 0.85 else USDC_MINT
            tx, coin = self._create_v2(user, mint_kp, name, symbol, uri, quote, now)
        if coin is not None:
            self._coins[coin.mint] = coin
            if self._rng.random() < 0.5:  # the creator's own first buy, in the same transaction
                sol_in = min(self._sol_amount(0.05, 3.0), self._balance(user.pubkey()) - _RESERVE)
                tokens = buy_tokens_out(coin.curve.reserves, sol_in)
                if tokens > 0:
                    self._append_buy(tx, coin, user, tokens, now)
            self._forget_oldest()
        return tx

    def _create_event(
        self,
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
        self, user_kp: Keypair, mint_kp: Keypair, name: str, symbol: str, uri: str, now: int
    ) -> tuple[_Tx, _Coin]:
        user, mint = user_kp.pubkey(), mint_kp.pubkey()
        tx = _Tx("create", user_kp)
        tx.signers.append(mint_kp)
        bonding_curve = pda.bonding_curve_pda(mint)
        abc = pda.associated_bonding_curve_pda(mint, TOKEN_PROGRAM_ID)
        mint_authority = pda.mint_authority_pda()
        curve = BondingCurve.new(user)
        mint_data = spl.pack_mint(TOKEN_TOTAL_SUPPLY, TOKEN_DECIMALS)
        rent_mint = spl.rent_exempt_minimum(len(mint_data))
        rent_curve = spl.rent_exempt_minimum(BONDING_CURVE_ACCOUNT_SIZE)

        ix = create_instruction(mint, user, CreateArgs(name, symbol, uri, user))
        call = _top_call(ix, self._rng.randint(38_000, 46_000)).log("Program log: Instruction: Create")
        call.cpi(cpi.system_create_account(user, mint, rent_mint, len(mint_data), TOKEN_PROGRAM_ID))
        call.cpi(cpi.token_initialize_mint2(TOKEN_PROGRAM_ID, mint, TOKEN_DECIMALS, mint_authority))
        call.cpi(
            cpi.system_create_account(user, bonding_curve, rent_curve, BONDING_CURVE_ACCOUNT_SIZE, PUMP_PROGRAM_ID)
        )
        call.cpi(
            cpi.ata_create(
                user, abc, bonding_curve, mint, TOKEN_PROGRAM_ID, idempotent=False, space=spl.TOKEN_ACCOUNT_SIZE
            )
        )
        call.cpi(
            cpi.metaplex_create_metadata_v3(
                pda.metaplex_metadata_pda(mint), mint, mint_authority, user, name, symbol, uri
            )
        )
        call.cpi(cpi.token_mint_to(TOKEN_PROGRAM_ID, mint, abc, mint_authority, TOKEN_TOTAL_SUPPLY))
        call.cpi(cpi.token_revoke_mint_authority(TOKEN_PROGRAM_ID, mint, mint_authority))
        event = self._create_event(mint, curve, user, TOKEN_PROGRAM_ID, name, symbol, uri, now)
        cpi.emit_event(call, PUMP_PROGRAM_ID, pda.event_authority_pda(), event)
        tx.add(ix, call)

        self._touch_token(tx, abc)
        self._debit(user, rent_mint + rent_curve + spl.rent_exempt_minimum(spl.TOKEN_ACCOUNT_SIZE))
        self._tokens[abc] = _TokenAccount(mint, bonding_curve, TOKEN_PROGRAM_ID, TOKEN_DECIMALS, TOKEN_TOTAL_SUPPLY)
        tx.extra[mint] = Account(rent_mint, mint_data, TOKEN_PROGRAM_ID, False, _RENT_EPOCH_EXEMPT)
        tx.curves[bonding_curve] = curve
        coin = _Coin(mint, "create", TOKEN_PROGRAM_ID, curve, bonding_curve, abc)
        return tx, coin

    def _create_v2(
        self, user_kp: Keypair, mint_kp: Keypair, name: str, symbol: str, uri: str, quote: Pubkey | None, now: int
    ) -> tuple[_Tx, _Coin | None]:
        user, mint = user_kp.pubkey(), mint_kp.pubkey()
        tx = _Tx("create_v2", user_kp)
        tx.signers.append(mint_kp)
        bonding_curve = pda.bonding_curve_pda(mint)
        abc = pda.associated_bonding_curve_pda(mint, TOKEN_2022_PROGRAM_ID)
        mint_authority = pda.mint_authority_pda()
        usdc = quote == USDC_MINT
        if usdc:
            curve = BondingCurve.new(
                user, quote_mint=USDC_MINT, virtual_quote_reserves=USDC_INITIAL_VIRTUAL_QUOTE_RESERVES
            )
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
        call = _top_call(ix, self._rng.randint(45_000, 60_000)).log("Program log: Instruction: CreateV2")
        call.cpi(cpi.system_create_account(user, mint, rent_mint, len(mint_data), TOKEN_2022_PROGRAM_ID))
        call.cpi(cpi.metadata_pointer_initialize(mint, None))
        call.cpi(cpi.token_initialize_mint2(TOKEN_2022_PROGRAM_ID, mint, TOKEN_DECIMALS, mint_authority))
        call.cpi(cpi.token_metadata_initialize(mint, mint_authority, mint_authority, name, symbol, uri))
        call.cpi(
            cpi.system_create_account(user, bonding_curve, rent_curve, BONDING_CURVE_ACCOUNT_SIZE, PUMP_PROGRAM_ID)
        )
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
        self._touch_token(tx, abc)
        if usdc and quote_accounts is not None:
            aqbc = quote_accounts.associated_quote_bonding_curve(mint)
            call.cpi(
                cpi.ata_create(
                    user,
                    aqbc,
                    bonding_curve,
                    USDC_MINT,
                    TOKEN_PROGRAM_ID,
                    idempotent=True,
                    space=spl.TOKEN_ACCOUNT_SIZE,
                )
            )
            self._touch_token(tx, aqbc)
            self._tokens[aqbc] = _TokenAccount(USDC_MINT, bonding_curve, TOKEN_PROGRAM_ID, _USDC_DECIMALS, 0)
            rent_total += spl.rent_exempt_minimum(spl.TOKEN_ACCOUNT_SIZE)
        call.cpi(cpi.token_mint_to(TOKEN_2022_PROGRAM_ID, mint, abc, mint_authority, TOKEN_TOTAL_SUPPLY))
        call.cpi(cpi.token_revoke_mint_authority(TOKEN_2022_PROGRAM_ID, mint, mint_authority))
        event = self._create_event(mint, curve, user, TOKEN_2022_PROGRAM_ID, name, symbol, uri, now)
        cpi.emit_event(call, PUMP_PROGRAM_ID, pda.event_authority_pda(), event)
        tx.add(ix, call)

        self._debit(user, rent_total)
        self._tokens[abc] = _TokenAccount(
            mint, bonding_curve, TOKEN_2022_PROGRAM_ID, TOKEN_DECIMALS, TOKEN_TOTAL_SUPPLY
        )
        tx.extra[mint] = Account(rent_mint, mint_data, TOKEN_2022_PROGRAM_ID, False, _RENT_EPOCH_EXEMPT)
        tx.curves[bonding_curve] = curve
        if usdc:  # not traded by this feed (see the module docstring): written once, then forgotten
            tx.forget_mints += [mint, USDC_MINT]
            return tx, None
        return tx, _Coin(mint, "create_v2", TOKEN_2022_PROGRAM_ID, curve, bonding_curve, abc)

    # ------------------------------------------------------------------ buy / sell

    def _buy(self, coin: _Coin, now: int) -> _Tx | None:
        user = self._pick_trader()
        sol_in = min(self._sol_amount(0.01, 5.0), self._balance(user.pubkey()) - _RESERVE)
        tokens = buy_tokens_out(coin.curve.reserves, sol_in)
        if tokens <= 0:
            return None
        tx = _Tx("buy", user)
        self._append_buy(tx, coin, user, tokens, now)
        return tx

    def _whale_buy(self, coin: _Coin, now: int) -> _Tx | None:
        """A buy of every token left on the curve: it completes the curve."""
        user = self._pick_trader()
        cost = buy_quote(coin.curve.reserves, coin.curve.real_token_reserves).total_cost
        if cost + _RESERVE + spl.rent_exempt_minimum(spl.TOKEN_2022_ACCOUNT_SIZE) > self._balance(user.pubkey()):
            return self._buy(coin, now)
        tx = _Tx("buy", user)
        self._append_buy(tx, coin, user, coin.curve.real_token_reserves, now)
        return tx

    def _trade_event(
        self,
        coin: _Coin,
        user: Pubkey,
        is_buy: bool,
        sol_amount: int,
        token_amount: int,
        fee_recipient: Pubkey,
        fee: int,
        creator_fee: int,
        now: int,
    ) -> TradeEvent:
        curve = coin.curve
        if is_buy:
            self._volume[user] = self._volume.get(user, 0) + sol_amount
        return TradeEvent(
            mint=coin.mint,
            sol_amount=sol_amount,
            token_amount=token_amount,
            is_buy=is_buy,
            user=user,
            timestamp=now,
            virtual_sol_reserves=curve.virtual_sol_reserves,
            virtual_token_reserves=curve.virtual_token_reserves,
            real_sol_reserves=curve.real_sol_reserves,
            real_token_reserves=curve.real_token_reserves,
            fee_recipient=fee_recipient,
            fee_basis_points=PROTOCOL_FEE_BPS,
            fee=fee,
            creator=curve.creator,
            creator_fee_basis_points=CREATOR_FEE_BPS,
            creator_fee=creator_fee,
            track_volume=is_buy,
            current_sol_volume=self._volume.get(user, 0),
            last_update_timestamp=now,
            ix_name="buy" if is_buy else "sell",
            quote_mint=curve.quote_mint,
            quote_amount=sol_amount,
            virtual_quote_reserves=curve.virtual_sol_reserves,
            real_quote_reserves=curve.real_sol_reserves,
        )

    def _append_buy(self, tx: _Tx, coin: _Coin, user_kp: Keypair, token_amount: int, now: int) -> None:
        user, mint, program = user_kp.pubkey(), coin.mint, coin.token_program
        quote = buy_quote(coin.curve.reserves, token_amount)
        user_ata = pda.associated_token_address(user, mint, program)
        self._touch_token(tx, user_ata)
        self._touch_token(tx, coin.associated_bonding_curve)
        if user_ata not in self._tokens:
            space = spl.TOKEN_2022_ACCOUNT_SIZE if program == TOKEN_2022_PROGRAM_ID else spl.TOKEN_ACCOUNT_SIZE
            ata_ix = Instruction(
                ASSOCIATED_TOKEN_PROGRAM_ID,
                spl.ata_create_idempotent_data(),
                [
                    AccountMeta(user, is_signer=True, is_writable=True),
                    AccountMeta(user_ata, is_signer=False, is_writable=True),
                    AccountMeta(user, is_signer=False, is_writable=False),
                    AccountMeta(mint, is_signer=False, is_writable=False),
                    AccountMeta(SYSTEM_PROGRAM_ID, is_signer=False, is_writable=False),
                    AccountMeta(program, is_signer=False, is_writable=False),
                ],
            )
            tx.add(ata_ix, cpi.ata_create(user, user_ata, user, mint, program, idempotent=True, space=space))
            self._debit(user, spl.rent_exempt_minimum(space))
            self._tokens[user_ata] = _TokenAccount(mint, user, program, TOKEN_DECIMALS, 0)

        fee_recipient = self._rng.choice(FEE_RECIPIENTS)
        creator_vault = pda.creator_vault_pda(coin.curve.creator)
        max_cost = int(quote.total_cost * (1 + self._slippage()))
        args = BuyArgs(quote.token_amount, max_cost, track_volume=True)
        buyback = self._rng.choice(BUYBACK_FEE_RECIPIENTS)
        ix = buy_instruction(mint, user, coin.curve.creator, fee_recipient, buyback, args, program)
        self._touch_wallets(tx, user, fee_recipient, creator_vault)

        self._debit(user, quote.total_cost)
        self._credit(fee_recipient, quote.protocol_fee)
        self._credit(creator_vault, quote.creator_fee)
        complete = quote.after.real_token_reserves == 0
        coin.curve = coin.curve.with_reserves(quote.after, complete=complete)
        self._tokens[coin.associated_bonding_curve].amount -= quote.token_amount
        self._tokens[user_ata].amount += quote.token_amount
        tx.curves[coin.bonding_curve] = coin.curve

        call = _top_call(ix, self._rng.randint(24_000, 42_000)).log("Program log: Instruction: Buy")
        call.cpi(
            cpi.token_transfer(
                program,
                coin.associated_bonding_curve,
                mint,
                user_ata,
                coin.bonding_curve,
                quote.token_amount,
                TOKEN_DECIMALS,
            )
        )
        call.cpi(cpi.system_transfer(user, coin.bonding_curve, quote.sol_amount))
        call.cpi(cpi.system_transfer(user, fee_recipient, quote.protocol_fee))
        call.cpi(cpi.system_transfer(user, creator_vault, quote.creator_fee))
        event = self._trade_event(
            coin,
            user,
            True,
            quote.sol_amount,
            quote.token_amount,
            fee_recipient,
            quote.protocol_fee,
            quote.creator_fee,
            now,
        )
        cpi.emit_event(call, PUMP_PROGRAM_ID, pda.event_authority_pda(), event)
        if complete:
            complete_event = CompleteEvent(user, mint, coin.bonding_curve, now, coin.curve.quote_mint)
            cpi.emit_event(call, PUMP_PROGRAM_ID, pda.event_authority_pda(), complete_event)
            self._graduations.append((self._step + self._rng.randint(1, 3), mint))
        tx.add(ix, call)

    def _sell(self, coin: _Coin, holding: _TokenAccount, now: int) -> _Tx | None:
        user_kp = next((kp for kp in self._traders if kp.pubkey() == holding.owner), None)
        if user_kp is None:
            return None
        user, mint, program = user_kp.pubkey(), coin.mint, coin.token_program
        fraction = self._rng.choice((0.25, 0.5, 1.0, 1.0))
        amount = holding.amount if fraction == 1.0 else int(holding.amount * fraction)
        quote = sell_quote(coin.curve.reserves, amount)
        if amount <= 0 or quote.sol_out <= 0 or quote.sol_amount > coin.curve.real_sol_reserves:
            return None
        tx = _Tx("sell", user_kp)
        user_ata = pda.associated_token_address(user, mint, program)
        self._touch_token(tx, user_ata)
        self._touch_token(tx, coin.associated_bonding_curve)
        fee_recipient = self._rng.choice(FEE_RECIPIENTS)
        creator_vault = pda.creator_vault_pda(coin.curve.creator)
        min_out = int(quote.sol_out * (1 - self._slippage()))
        buyback = self._rng.choice(BUYBACK_FEE_RECIPIENTS)
        ix = sell_instruction(
            mint, user, coin.curve.creator, fee_recipient, buyback, SellArgs(amount, min_out), program
        )
        self._touch_wallets(tx, user, fee_recipient, creator_vault)

        self._credit(user, quote.sol_out)
        self._credit(fee_recipient, quote.protocol_fee)
        self._credit(creator_vault, quote.creator_fee)
        coin.curve = coin.curve.with_reserves(quote.after)
        self._tokens[coin.associated_bonding_curve].amount += amount
        holding.amount -= amount
        tx.curves[coin.bonding_curve] = coin.curve

        # The curve is owned by the pump program, which moves its lamports directly (no system CPI).
        call = _top_call(ix, self._rng.randint(20_000, 36_000)).log("Program log: Instruction: Sell")
        call.cpi(
            cpi.token_transfer(program, user_ata, mint, coin.associated_bonding_curve, user, amount, TOKEN_DECIMALS)
        )
        event = self._trade_event(
            coin, user, False, quote.sol_amount, amount, fee_recipient, quote.protocol_fee, quote.creator_fee, now
        )
        cpi.emit_event(call, PUMP_PROGRAM_ID, pda.event_authority_pda(), event)
        tx.add(ix, call)
        return tx

    # ------------------------------------------------------------------ graduation

    def _migrate(self, coin: _Coin, now: int) -> _Tx:
        """pump `migrate`: the completed curve's tokens and SOL seed PumpSwap pool 0 (mint/wSOL), created by
        CPI to `create_pool` with `pool_authority` as creator; the LP tokens are burned."""
        user = self._migrator
        mint, program = coin.mint, coin.token_program
        tx = _Tx("migrate", user)
        pool_authority = pda.pool_authority_pda(mint)
        pool, pool_bump = pda.pool_pda_and_bump(0, pool_authority, mint, WSOL_MINT)
        lp_mint = pda.pool_lp_mint_pda(pool)
        pa_base = pda.associated_token_address(pool_authority, mint, program)
        pa_quote = pda.associated_token_address(pool_authority, WSOL_MINT, TOKEN_PROGRAM_ID)
        pa_lp = pda.associated_token_address(pool_authority, lp_mint, TOKEN_2022_PROGRAM_ID)
        pool_base = pda.associated_token_address(pool, mint, program)
        pool_quote = pda.associated_token_address(pool, WSOL_MINT, TOKEN_PROGRAM_ID)
        for address in (coin.associated_bonding_curve, pa_base, pa_quote, pa_lp, pool_base, pool_quote):
            self._touch_token(tx, address)
        self._touch_wallets(tx, user.pubkey(), WITHDRAW_AUTHORITY)

        base_space = spl.TOKEN_2022_ACCOUNT_SIZE if program == TOKEN_2022_PROGRAM_ID else spl.TOKEN_ACCOUNT_SIZE
        base_amount = self._tokens[coin.associated_bonding_curve].amount
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
        call = _top_call(ix, self._rng.randint(55_000, 70_000)).log("Program log: Instruction: Migrate")
        call.cpi(
            cpi.ata_create(pool_authority, pa_base, pool_authority, mint, program, idempotent=True, space=base_space)
        )
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
        self._credit(WITHDRAW_AUTHORITY, POOL_MIGRATION_FEE)
        drained = CurveReserves(coin.curve.virtual_token_reserves, coin.curve.virtual_sol_reserves, 0, 0)
        coin.curve = coin.curve.with_reserves(drained)
        tx.curves[coin.bonding_curve] = coin.curve
        self._tokens[coin.associated_bonding_curve].amount = 0
        self._tokens[pa_base] = _TokenAccount(mint, pool_authority, program, TOKEN_DECIMALS, 0)
        wsol_reserve = spl.rent_exempt_minimum(spl.TOKEN_ACCOUNT_SIZE)
        self._tokens[pa_quote] = _TokenAccount(
            WSOL_MINT, pool_authority, TOKEN_PROGRAM_ID, _WSOL_DECIMALS, 0, wsol_reserve
        )
        self._tokens[pa_lp] = _TokenAccount(lp_mint, pool_authority, TOKEN_2022_PROGRAM_ID, _LP_DECIMALS, 0)
        self._tokens[pool_base] = _TokenAccount(mint, pool, program, TOKEN_DECIMALS, base_amount)
        self._tokens[pool_quote] = _TokenAccount(
            WSOL_MINT, pool, TOKEN_PROGRAM_ID, _WSOL_DECIMALS, quote_amount, wsol_reserve
        )
        tx.extra[pool] = Account(
            spl.rent_exempt_minimum(pool_size), encode_pool(pool_state), PUMP_AMM_PROGRAM_ID, False, _RENT_EPOCH_EXEMPT
        )
        lp_mint_data = spl.pack_mint(0, _LP_DECIMALS, mint_authority=pool)
        tx.extra[lp_mint] = Account(
            spl.rent_exempt_minimum(spl.MINT_SIZE), lp_mint_data, TOKEN_2022_PROGRAM_ID, False, _RENT_EPOCH_EXEMPT
        )
        tx.forget_mints += [mint, lp_mint, WSOL_MINT]
        return tx

    # ------------------------------------------------------------------ assembling the transaction

    def _curve_account(self, curve: BondingCurve) -> Account:
        lamports = spl.rent_exempt_minimum(BONDING_CURVE_ACCOUNT_SIZE)
        if curve.is_sol_quoted:
            lamports += curve.real_sol_reserves
        return Account(lamports, encode_bonding_curve(curve), PUMP_PROGRAM_ID, False, _RENT_EPOCH_EXEMPT)

    def _compile(self, tx: _Tx, blockhash: Hash, limit: int, price: int) -> VersionedTransaction:
        while True:
            ixs = [set_compute_unit_limit(limit), set_compute_unit_price(price), *tx.instructions]
            message = MessageV0.try_compile(tx.payer.pubkey(), ixs, [], blockhash)
            signed = VersionedTransaction(message, tx.signers)
            if signed.signatures[0] not in self._seen:
                return signed
            limit -= 1  # an identical message was already sent against this blockhash: make it unique

    def _finish(self, tx: _Tx, blockhash: Hash) -> InjectedTransaction:
        needed = 300 + sum(_total_units(c) for c in tx.calls)
        candidates = [x for x in _CU_LIMITS if x >= needed * 1.1] or [_CU_LIMITS[-1]]
        limit = self._rng.choice(candidates[:3])
        price = int(round(10 ** self._rng.uniform(3.0, 6.5), -2))
        signed = self._compile(tx, blockhash, limit, price)
        message = signed.message
        limit = int.from_bytes(bytes(message.instructions[0].data)[1:5], "little")
        keys = list(message.account_keys)
        trace = render_trace([cpi.compute_unit_limit(limit), cpi.compute_unit_price(price), *tx.calls], keys, limit)
        fee = _SIGNATURE_FEE * len(signed.signatures) + math.ceil(limit * price / 1_000_000)

        writes: list[tuple[Pubkey, Account]] = []
        if not self._global_written:
            global_data = encode_global(Global(withdraw_authority=WITHDRAW_AUTHORITY))
            global_account = Account(
                spl.rent_exempt_minimum(len(global_data)), global_data, PUMP_PROGRAM_ID, False, _RENT_EPOCH_EXEMPT
            )
            writes.append((pda.global_pda(), global_account))
            self._global_written = True
        writes += list(tx.extra.items())
        writes += [(address, self._curve_account(curve)) for address, curve in tx.curves.items()]
        writes += [(address, self._tokens[address].to_account()) for address in tx.tokens if address in self._tokens]
        writes += [(pubkey, _system_account(self._lamports[pubkey])) for pubkey in tx.wallets if self._lamports[pubkey]]

        index_of = {key: i for i, key in enumerate(keys)}
        pre: list[dict[str, Any]] = []
        post: list[dict[str, Any]] = []
        for address, before in tx.tokens.items():
            state = self._tokens.get(address)
            if state is None or address not in index_of:
                continue
            i = index_of[address]
            if before is not None:
                pre.append(token_balance(i, state.mint, state.owner, state.program, before, state.decimals))
            post.append(token_balance(i, state.mint, state.owner, state.program, state.amount, state.decimals))
        pre.sort(key=lambda b: int(b["accountIndex"]))
        post.sort(key=lambda b: int(b["accountIndex"]))

        # The chain debits the fee after applying the writes (devnode/injected.py): follow it.
        self._debit(tx.payer.pubkey(), fee)
        self._seen[signed.signatures[0]] = None
        if len(self._seen) > _MAX_SEEN_SIGNATURES:
            del self._seen[next(iter(self._seen))]
        for mint in tx.forget_mints:
            self._forget(mint)
        self.counts[tx.kind] += 1
        return InjectedTransaction(
            transaction=signed,
            log_messages=trace.log_messages,
            inner_instructions=trace.inner_instructions,
            account_writes=writes,
            compute_units_consumed=trace.compute_units_consumed,
            fee=fee,
            pre_token_balances=pre,
            post_token_balances=post,
        )

"""The feed's working state: the generated wallets, its own view of their balances, the coins it
tracks and their token accounts, and the small types a transaction is assembled from.

The feed never reads its own writes back from the chain: it keeps lamports and token amounts here, in
step with what it injects, and the builders (create, trade, migrate, assemble) read and update them
through `FeedState`. What other transactions change (a user's buy on a feed coin, a transfer to a fee
recipient) is read back by `refresh`, before the next step builds on it. One `random.Random(seed)` drives
every draw, so a seed replays the same stream; the wallets come from the seed alone, and every draw after
them from the seed and the run (`run_seed`): a restarted devnode keeps its wallets and launches new coins.
"""

from __future__ import annotations

import math
import random
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Final, Literal, Protocol

from solders.account import Account
from solders.hash import Hash
from solders.instruction import Instruction
from solders.keypair import Keypair
from solders.pubkey import Pubkey
from solders.signature import Signature

from devnode.injected import InjectedTransaction
from pumpfun import spl
from pumpfun.accounts import BondingCurve, Global, decode_bonding_curve
from pumpfun.curve import FeeRates
from pumpfun.fees import buyback_fee_recipients, fee_rates, fee_recipients
from pumpfun.ids import PUMP_PROGRAM_ID, TOKEN_2022_PROGRAM_ID
from pumpfun.instructions import WITHDRAW_AUTHORITY
from pumpfun.trace import Call

LAMPORTS_PER_SOL: Final = 1_000_000_000
TRADER_COUNT: Final = 24
TRADER_AIRDROP_LAMPORTS: Final = 2_000 * LAMPORTS_PER_SOL
#: A trader below this balance gets another airdrop (so a long-running feed never runs dry).
_TOP_UP_BELOW: Final = 100 * LAMPORTS_PER_SOL
#: Lamports a trader keeps aside for fees and rent when sizing a buy.
RESERVE: Final = LAMPORTS_PER_SOL // 20
#: Coins still traded; older ones stop trading (and leave the feed's memory), as most pump coins do.
MAX_LIVE_COINS: Final = 40
RENT_EPOCH_EXEMPT: Final = 2**64 - 1
#: The pump `Global` account the feed writes on its first transaction (the documented example values:
#: protocol 95 bps + creator 30 bps). Every trade takes its fee rates and fee recipients from it, as a
#: client reads them from the chain (`pumpfun.fees`).
PUMP_GLOBAL: Final = Global(withdraw_authority=WITHDRAW_AUTHORITY)


class ChainLike(Protocol):
    """What the feed needs from the chain (devnode.chain.Chain provides it)."""

    @property
    def slot(self) -> int: ...

    def inject(self, tx: InjectedTransaction) -> Signature: ...

    def latest_blockhash(self) -> Hash: ...

    def get_account(self, pubkey: Pubkey) -> Account | None: ...

    def airdrop(self, pubkey: Pubkey, lamports: int) -> object: ...


@dataclass
class Coin:
    mint: Pubkey
    kind: Literal["create", "create_v2"]
    token_program: Pubkey
    curve: BondingCurve
    bonding_curve: Pubkey
    associated_bonding_curve: Pubkey


@dataclass
class TokenAccount:
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
        return Account(lamports, data, self.program, False, RENT_EPOCH_EXEMPT)


class Tx:
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


def top_call(ix: Instruction, units: int) -> Call:
    return Call(ix.program_id, [m.pubkey for m in ix.accounts], bytes(ix.data), units=units)


def run_seed(seed: int, run: int) -> str:
    """What seeds the draws after the wallets in run `run` of a feed seeded `seed` (run 0 goes on from the
    wallets' own stream, so that a fresh data dir still gives what the seed always gave)."""
    return f"devnode-feed:{seed}:run-{run}"


class FeedState:
    """The seeded random source, the generated wallets and what the feed knows of their accounts.

    `run` counts the feed's starts on one chain (`LaunchFeed`'s `run_file`): the wallets are the seed's in
    every run, the coins are new in each."""

    def __init__(self, chain: ChainLike, seed: int, run: int = 0) -> None:
        self.chain = chain
        self.rng = random.Random(seed)
        self.traders = [Keypair.from_seed(self.rng.randbytes(32)) for _ in range(TRADER_COUNT)]
        self.migrator = Keypair.from_seed(self.rng.randbytes(32))
        if run:
            self.rng.seed(run_seed(seed, run))
        self.lamports: dict[Pubkey, int] = {}
        self.coins: dict[Pubkey, Coin] = {}
        self.tokens: dict[Pubkey, TokenAccount] = {}
        self.volume: dict[Pubkey, int] = {}
        self.graduations: list[tuple[int, Pubkey]] = []
        self.seen: dict[Signature, None] = {}
        self.step = 0
        self.funded = False
        self.pump_global = PUMP_GLOBAL
        self.global_written = False
        self.counts: Counter[str] = Counter()

    def fund_traders(self) -> None:
        if self.funded:
            return
        for kp in [*self.traders, self.migrator]:
            self.chain.airdrop(kp.pubkey(), TRADER_AIRDROP_LAMPORTS)
            account = self.chain.get_account(kp.pubkey())
            self.lamports[kp.pubkey()] = account.lamports if account is not None else TRADER_AIRDROP_LAMPORTS
        self.funded = True

    def balance(self, pubkey: Pubkey) -> int:
        if pubkey not in self.lamports:
            account = self.chain.get_account(pubkey)
            self.lamports[pubkey] = account.lamports if account is not None else 0
        return self.lamports[pubkey]

    def credit(self, pubkey: Pubkey, lamports: int) -> None:
        self.lamports[pubkey] = self.balance(pubkey) + lamports

    def debit(self, pubkey: Pubkey, lamports: int) -> None:
        balance = self.balance(pubkey)
        if lamports > balance:
            raise ValueError(f"{pubkey} cannot pay {lamports} lamports (has {balance})")
        self.lamports[pubkey] = balance - lamports

    def top_up(self, trader: Keypair) -> None:
        if self.balance(trader.pubkey()) < _TOP_UP_BELOW:
            self.chain.airdrop(trader.pubkey(), TRADER_AIRDROP_LAMPORTS)
            self.credit(trader.pubkey(), TRADER_AIRDROP_LAMPORTS)

    def touch_token(self, tx: Tx, address: Pubkey) -> None:
        if address not in tx.tokens:
            existing = self.tokens.get(address)
            tx.tokens[address] = existing.amount if existing is not None else None

    def touch_wallets(self, tx: Tx, *pubkeys: Pubkey) -> None:
        for pubkey in pubkeys:
            self.balance(pubkey)
            tx.wallets[pubkey] = None

    def new_mint(self) -> Keypair:
        """A mint keypair for a new coin, never one with an account on the chain: a coin is created once,
        whatever the chain kept from earlier runs."""
        while True:
            mint = Keypair.from_seed(self.rng.randbytes(32))
            if self.chain.get_account(mint.pubkey()) is None:
                return mint

    def live_coins(self) -> list[Coin]:
        return [c for c in self.coins.values() if not c.curve.complete]

    def forget_oldest(self) -> None:
        live = self.live_coins()
        while len(live) > MAX_LIVE_COINS:
            self.forget(live.pop(0).mint)

    def forget(self, mint: Pubkey) -> None:
        self.coins.pop(mint, None)
        for address in [a for a, t in self.tokens.items() if t.mint == mint]:
            del self.tokens[address]

    def refresh(self, changed: Iterable[Pubkey]) -> None:
        """Read back accounts that transactions the feed did not make have changed: lamports (re-read when next
        needed), token amounts (a closed account is forgotten) and the curves of the coins it trades. A curve a
        user's buy completed graduates at the next step, as the feed's own completing buys do."""
        curves = {coin.bonding_curve: coin for coin in self.coins.values()}
        for key in changed:
            self.lamports.pop(key, None)
            token = self.tokens.get(key)
            if token is not None:
                account = self.chain.get_account(key)
                if account is None or account.owner != token.program:
                    del self.tokens[key]
                else:
                    token.amount = spl.decode_token_account_amount(bytes(account.data))
            coin = curves.get(key)
            if coin is not None:
                account = self.chain.get_account(key)
                if account is not None and account.owner == PUMP_PROGRAM_ID:
                    completed = not coin.curve.complete
                    coin.curve = decode_bonding_curve(bytes(account.data))
                    if completed and coin.curve.complete:
                        self.graduations.append((self.step + 1, coin.mint))

    def fee_rates(self, curve: BondingCurve) -> FeeRates:
        """The protocol and creator fee rates a trade on `curve` pays, by the Global account."""
        return fee_rates(self.pump_global, curve)

    def pick_fee_recipient(self, curve: BondingCurve) -> Pubkey:
        return self.rng.choice(fee_recipients(self.pump_global, curve))

    def pick_buyback_fee_recipient(self) -> Pubkey:
        return self.rng.choice(buyback_fee_recipients(self.pump_global))

    def pick_trader(self) -> Keypair:
        trader = self.rng.choice(self.traders)
        self.top_up(trader)
        return trader

    def slippage(self) -> float:
        return self.rng.choice((0.01, 0.05, 0.1, 0.15, 0.25, 0.5))

    def sol_amount(self, low_sol: float, high_sol: float) -> int:
        return int(10 ** self.rng.uniform(math.log10(low_sol), math.log10(high_sol)) * LAMPORTS_PER_SOL)

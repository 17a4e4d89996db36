"""The launch feed (devnode/feed/) on its own.

`StandInChain` stands in for devnode.chain.Chain so the feed can be tested alone: it applies each
injected transaction the way devnode/injected.py specifies (account writes, then the fee debited from the
fee payer) and records what it was given. Nothing here executes the pump program; the checks recompute
what each transaction implies from its signed instructions and compare it with the state it writes.
"""

from __future__ import annotations

import asyncio
import math
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import base58
import pytest
from solders.account import Account
from solders.hash import Hash
from solders.message import MessageV0
from solders.pubkey import Pubkey
from solders.signature import Signature
from solders.token.state import Mint

from devnode.feed import LaunchFeed
from devnode.feed.create import USDC_INITIAL_VIRTUAL_QUOTE_RESERVES
from devnode.feed.state import TRADER_COUNT
from devnode.injected import InjectedTransaction
from pumpfun import pda, spl
from pumpfun.accounts import (
    BONDING_CURVE_ACCOUNT_SIZE,
    INITIAL_REAL_TOKEN_RESERVES,
    TOKEN_TOTAL_SUPPLY,
    BondingCurve,
    Global,
    decode_bonding_curve,
    decode_global,
)
from pumpfun.curve import CurveReserves, buy_quote, fee, sell_quote
from pumpfun.events import (
    CompleteEvent,
    CompletePumpAmmMigrationEvent,
    CreateEvent,
    CreatePoolEvent,
    Event,
    TradeEvent,
    decode_event_cpi,
    decode_program_data_log,
)
from pumpfun.fees import buyback_fee_recipients, fee_rates, fee_recipients
from pumpfun.ids import (
    COMPUTE_BUDGET_PROGRAM_ID,
    PUMP_AMM_PROGRAM_ID,
    PUMP_PROGRAM_ID,
    TOKEN_2022_PROGRAM_ID,
    TOKEN_PROGRAM_ID,
    USDC_MINT,
    WSOL_MINT,
)
from pumpfun.instructions import (
    CREATE_POOL_DISCRIMINATOR,
    BuyArgs,
    CreateArgs,
    CreateV2Args,
    SellArgs,
    decode_amm_instruction,
    decode_pump_instruction,
)

BLOCKHASH = Hash.from_string("4vJ9JU1bJJE96FWSJKvHsmmFADCg4gpZQff4P3bkLKi")
NOW = 1_760_000_000
STEPS = 300


@dataclass
class StandInChain:
    """Stands in for devnode.chain.Chain: applies writes, debits the fee, records everything."""

    slot: int = 1
    accounts: dict[Pubkey, Account] = field(default_factory=dict)
    injected: list[InjectedTransaction] = field(default_factory=list)
    airdrops: list[tuple[Pubkey, int]] = field(default_factory=list)

    def latest_blockhash(self) -> Hash:
        return BLOCKHASH

    def get_account(self, pubkey: Pubkey) -> Account | None:
        return self.accounts.get(pubkey)

    def lamports(self, pubkey: Pubkey) -> int:
        account = self.accounts.get(pubkey)
        return account.lamports if account is not None else 0

    def airdrop(self, pubkey: Pubkey, lamports: int) -> None:
        self.airdrops.append((pubkey, lamports))
        self.accounts[pubkey] = Account(self.lamports(pubkey) + lamports, b"", Pubkey.default())

    def inject(self, tx: InjectedTransaction) -> Signature:
        for pubkey, account in tx.account_writes:
            self.accounts[pubkey] = account
        payer = tx.transaction.message.account_keys[0]
        before = self.accounts[payer]
        assert before.lamports >= tx.fee
        self.accounts[payer] = Account(before.lamports - tx.fee, bytes(before.data), before.owner)
        self.injected.append(tx)
        return tx.transaction.signatures[0]


@dataclass
class Run:
    chain: StandInChain
    feed: LaunchFeed
    txs: list[InjectedTransaction]
    # lamports of each written account just before its transaction was applied
    before: list[dict[Pubkey, int]]


def run_feed(seed: int = 7, steps: int = STEPS) -> Run:
    chain = StandInChain()
    feed = LaunchFeed(chain, seed=seed, clock=lambda: NOW)
    txs: list[InjectedTransaction] = []
    before: list[dict[Pubkey, int]] = []
    for _ in range(steps):
        for tx in feed.next_transactions():
            before.append({pubkey: chain.lamports(pubkey) for pubkey, _ in tx.account_writes})
            chain.inject(tx)
            txs.append(tx)
    return Run(chain, feed, txs, before)


@pytest.fixture(scope="module")
def run() -> Run:
    return run_feed()


def keys_of(tx: InjectedTransaction) -> list[Pubkey]:
    return list(tx.transaction.message.account_keys)


def message(tx: InjectedTransaction) -> MessageV0:
    msg = tx.transaction.message
    assert isinstance(msg, MessageV0)
    return msg


def written_global(run: Run) -> Global:
    """The pump Global account as the run wrote it to the chain (what a client reads its fees from)."""
    account = run.chain.accounts[pda.global_pda()]
    assert account.owner == PUMP_PROGRAM_ID
    return decode_global(bytes(account.data))


def pump_instructions(tx: InjectedTransaction) -> list[tuple[int, list[Pubkey], bytes]]:
    keys = keys_of(tx)
    return [
        (i, [keys[a] for a in ix.accounts], bytes(ix.data))
        for i, ix in enumerate(message(tx).instructions)
        if keys[ix.program_id_index] == PUMP_PROGRAM_ID
    ]


def kind_of(data: bytes) -> str:
    args = decode_pump_instruction(data)
    return {CreateArgs: "create", CreateV2Args: "create_v2", BuyArgs: "buy", SellArgs: "sell"}.get(
        type(args), "migrate"
    )


def inner_events(tx: InjectedTransaction, program: Pubkey) -> list[Event]:
    keys = keys_of(tx)
    authority = pda.event_authority_pda(program)
    found = []
    for group in tx.inner_instructions:
        for inner in group["instructions"]:
            if keys[inner["programIdIndex"]] == program and inner["accounts"] == [keys.index(authority)]:
                found.append(decode_event_cpi(base58.b58decode(inner["data"])))
    return found


def inner_create_pools(tx: InjectedTransaction) -> list[bytes]:
    keys = keys_of(tx)
    return [
        data
        for group in tx.inner_instructions
        for inner in group["instructions"]
        if keys[inner["programIdIndex"]] == PUMP_AMM_PROGRAM_ID
        and (data := base58.b58decode(inner["data"]))[:8] == CREATE_POOL_DISCRIMINATOR
    ]


# --------------------------------------------------------------------------------------------------------


def test_a_fixed_seed_gives_the_same_signatures_twice() -> None:
    first = [tx.transaction.signatures[0] for tx in run_feed(seed=7, steps=60).txs]
    second = [tx.transaction.signatures[0] for tx in run_feed(seed=7, steps=60).txs]
    other = [tx.transaction.signatures[0] for tx in run_feed(seed=8, steps=60).txs]
    assert first == second
    assert len(set(first)) == len(first)
    assert not set(first) & set(other)


def test_300_steps_mix_every_kind_of_transaction(run: Run) -> None:
    kinds: Counter[str] = Counter()
    quotes: Counter[str] = Counter()
    for tx in run.txs:
        for _, accounts, data in pump_instructions(tx):
            kinds[kind_of(data)] += 1
            if kind_of(data) == "create_v2":
                quotes[str(accounts[16]) if len(accounts) > 16 else "none"] += 1
        kinds["create_pool"] += len(inner_create_pools(tx))
    assert {"create", "create_v2", "buy", "sell", "migrate", "create_pool"} <= set(kinds)
    assert kinds["buy"] > kinds["create"] + kinds["create_v2"]
    assert kinds["create_pool"] == kinds["migrate"] >= 1
    assert set(quotes) == {"none", str(WSOL_MINT), str(USDC_MINT)}
    assert len(run.txs) >= STEPS


def test_every_transaction_is_really_signed(run: Run) -> None:
    for tx in run.txs:
        assert all(tx.transaction.verify_with_results())
        msg = message(tx)
        assert msg.recent_blockhash == BLOCKHASH
        assert keys_of(tx)[0] in run.feed.traders or kind_of(pump_instructions(tx)[0][2]) == "migrate"
        creates = [accounts for _, accounts, data in pump_instructions(tx) if kind_of(data).startswith("create")]
        if creates:  # the mint keypair co-signs
            assert len(tx.transaction.signatures) == 2
            assert keys_of(tx)[1] == creates[0][0]


def test_compute_budget_comes_first_and_the_fee_follows_from_it(run: Run) -> None:
    prices = set()
    for tx in run.txs:
        keys, msg = keys_of(tx), message(tx)
        limit_ix, price_ix = msg.instructions[0], msg.instructions[1]
        assert keys[limit_ix.program_id_index] == keys[price_ix.program_id_index] == COMPUTE_BUDGET_PROGRAM_ID
        assert bytes(limit_ix.data)[0] == 2 and bytes(price_ix.data)[0] == 3
        limit = int.from_bytes(bytes(limit_ix.data)[1:5], "little")
        price = int.from_bytes(bytes(price_ix.data)[1:9], "little")
        prices.add(price)
        assert tx.compute_units_consumed <= limit
        assert tx.fee == 5_000 * len(tx.transaction.signatures) + math.ceil(limit * price / 1_000_000)
    assert len(prices) > len(run.txs) // 2


def test_curve_accounts_hold_the_state_the_signed_trades_imply(run: Run) -> None:
    global_ = written_global(run)
    curves: dict[Pubkey, BondingCurve] = {}
    wsol_curves: set[Pubkey] = set()
    for tx in run.txs:
        writes = dict(tx.account_writes)
        touched: dict[Pubkey, BondingCurve] = {}
        for _, accounts, data in pump_instructions(tx):
            args = decode_pump_instruction(data)
            if isinstance(args, CreateArgs | CreateV2Args):
                address = accounts[2]
                quote = accounts[16] if len(accounts) > 16 else None
                written = decode_bonding_curve(bytes(writes[address].data))
                if quote == USDC_MINT:
                    touched[address] = BondingCurve.new(
                        args.creator, quote_mint=USDC_MINT, virtual_quote_reserves=USDC_INITIAL_VIRTUAL_QUOTE_RESERVES
                    )
                elif quote == WSOL_MINT and written.quote_mint == WSOL_MINT:  # a wSOL-quoted curve
                    touched[address] = BondingCurve.new(args.creator, quote_mint=WSOL_MINT)
                    wsol_curves.add(address)
                else:  # wSOL passed as the quote still makes a SOL coin
                    touched[address] = BondingCurve.new(args.creator)
                assert address == pda.bonding_curve_pda(accounts[0])
                continue
            address = accounts[3]
            prev = touched.get(address) or curves[address]
            if isinstance(args, BuyArgs):
                q = buy_quote(prev.reserves, args.amount, fee_rates(global_, prev))
                assert q.token_amount == args.amount and q.total_cost <= args.max_sol_cost
                touched[address] = prev.with_reserves(q.after, complete=q.completes)
            elif isinstance(args, SellArgs):
                s = sell_quote(prev.reserves, args.amount, fee_rates(global_, prev))
                assert s.sol_out >= args.min_sol_output
                touched[address] = prev.with_reserves(s.after)
            else:  # migrate: the liquidity leaves the curve
                assert prev.complete
                drained = CurveReserves(prev.virtual_token_reserves, prev.virtual_sol_reserves, 0, 0)
                touched[address] = prev.with_reserves(drained)
        for address, expected in touched.items():
            account = writes[address]
            assert account.owner == PUMP_PROGRAM_ID
            assert len(account.data) == BONDING_CURVE_ACCOUNT_SIZE
            assert decode_bonding_curve(bytes(account.data)) == expected
            rent = spl.rent_exempt_minimum(BONDING_CURVE_ACCOUNT_SIZE)
            assert account.lamports == rent + (expected.real_sol_reserves if expected.is_sol_quoted else 0)
            curves[address] = expected
    assert any(c.complete for c in curves.values())
    assert wsol_curves and any(c.is_sol_quoted for c in curves.values() if c.creator != Pubkey.default())


def test_the_curve_token_account_holds_what_was_not_sold(run: Run) -> None:
    for tx in run.txs:
        writes = dict(tx.account_writes)
        for _, accounts, data in pump_instructions(tx):
            if kind_of(data) not in ("buy", "sell"):
                continue
            curve = decode_bonding_curve(bytes(writes[accounts[3]].data))
            abc = writes[accounts[4]]
            sold = INITIAL_REAL_TOKEN_RESERVES - curve.real_token_reserves
            assert spl.decode_token_account_amount(bytes(abc.data)) == TOKEN_TOTAL_SUPPLY - sold
            assert abc.owner in (TOKEN_PROGRAM_ID, TOKEN_2022_PROGRAM_ID)


def test_lamports_move_between_written_accounts_only(run: Run) -> None:
    """Every transaction conserves lamports across the accounts it writes (the fee is the chain's)."""
    global_written = 0
    for tx, before in zip(run.txs, run.before, strict=True):
        pubkeys = [pubkey for pubkey, _ in tx.account_writes]
        assert len(pubkeys) == len(set(pubkeys))
        delta = sum(a.lamports for _, a in tx.account_writes) - sum(before.values())
        if pda.global_pda() in pubkeys:
            global_written += 1
            delta -= dict(tx.account_writes)[pda.global_pda()].lamports
        assert delta == 0
    assert global_written == 1
    for trader in run.feed.traders:
        assert run.chain.lamports(trader) > 0


def test_events_ride_in_inner_instructions_and_in_the_logs(run: Run) -> None:
    seen: Counter[str] = Counter()
    for tx in run.txs:
        logged = [decode_program_data_log(line) for line in tx.log_messages if line.startswith("Program data: ")]
        emitted = inner_events(tx, PUMP_PROGRAM_ID) + inner_events(tx, PUMP_AMM_PROGRAM_ID)
        assert sorted(map(repr, logged)) == sorted(map(repr, emitted))
        writes = dict(tx.account_writes)
        for event in emitted:
            seen[type(event).__name__] += 1
            if isinstance(event, CreateEvent):
                assert event.bonding_curve == pda.bonding_curve_pda(event.mint)
                assert event.token_program == writes[event.mint].owner
                assert event.timestamp == NOW
            elif isinstance(event, TradeEvent):  # one trade per curve per transaction: its reserves are the state after
                curve = decode_bonding_curve(bytes(writes[pda.bonding_curve_pda(event.mint)].data))
                assert event.virtual_sol_reserves == curve.virtual_sol_reserves
                assert event.virtual_token_reserves == curve.virtual_token_reserves
                assert event.real_sol_reserves == curve.real_sol_reserves
                assert event.real_token_reserves == curve.real_token_reserves
                assert (event.fee_basis_points, event.creator_fee_basis_points) == (95, 30)
            elif isinstance(event, CompleteEvent):
                assert decode_bonding_curve(bytes(writes[event.bonding_curve].data)).complete
            elif isinstance(event, CreatePoolEvent):
                assert event.creator == pda.pool_authority_pda(event.base_mint)  # a canonical pool
                assert event.quote_mint == WSOL_MINT
                assert event.pool == pda.pool_pda(0, event.creator, event.base_mint, WSOL_MINT)
                assert writes[event.pool].owner == PUMP_AMM_PROGRAM_ID
    expected = {CreateEvent, TradeEvent, CompleteEvent, CreatePoolEvent, CompletePumpAmmMigrationEvent}
    assert {t.__name__ for t in expected} <= set(seen)


def test_trades_pay_the_fees_of_the_global_account_to_its_recipients(run: Run) -> None:
    """The feed prices every trade with the rates of the Global it wrote (95 + 30 bps, as before the rates
    came from the account) and pays a fee recipient and a buyback recipient that Global lists."""
    global_ = written_global(run)
    assert (global_.fee_basis_points, global_.creator_fee_basis_points) == (95, 30)
    trades = 0
    for tx in run.txs:
        events = [e for e in inner_events(tx, PUMP_PROGRAM_ID) if isinstance(e, TradeEvent)]
        trade_ixs = [
            (accounts, data) for _, accounts, data in pump_instructions(tx) if kind_of(data) in ("buy", "sell")
        ]
        assert len(events) == len(trade_ixs)
        for event, (accounts, _) in zip(events, trade_ixs, strict=True):
            curve = decode_bonding_curve(bytes(dict(tx.account_writes)[accounts[3]].data))
            rates = fee_rates(global_, curve)
            assert (event.fee_basis_points, event.creator_fee_basis_points) == (rates.protocol_bps, rates.creator_bps)
            assert (event.fee, event.creator_fee) == (
                fee(event.sol_amount, rates.protocol_bps),
                fee(event.sol_amount, rates.creator_bps),
            )
            assert event.fee_recipient == accounts[1] and accounts[1] in fee_recipients(global_, curve)
            assert accounts[-1] in buyback_fee_recipients(global_)
            trades += 1
    assert trades


def test_logs_look_like_mainnet(run: Run) -> None:
    for tx in run.txs:
        lines = tx.log_messages
        assert lines[0] == f"Program {COMPUTE_BUDGET_PROGRAM_ID} invoke [1]"
        assert f"Program {PUMP_PROGRAM_ID} invoke [1]" in lines
        stack: list[str] = []
        for line in lines:
            parts = line.split(" ")
            if line.endswith("]") and parts[2] == "invoke":
                assert int(parts[3].strip("[]")) == len(stack) + 1
                stack.append(parts[1])
            elif parts[0] == "Program" and parts[-1] == "success":
                assert stack.pop() == parts[1]
            elif "consumed" in parts:
                assert parts[1] == stack[-1]
                assert int(parts[3]) <= int(parts[5])
            else:
                assert line.startswith(("Program log: ", "Program data: "))
        assert not stack
        pump_ixs = [kind_of(data) for _, _, data in pump_instructions(tx)]
        names = {"create": "Create", "create_v2": "CreateV2", "buy": "Buy", "sell": "Sell", "migrate": "Migrate"}
        for kind in pump_ixs:
            assert f"Program log: Instruction: {names[kind]}" in lines


def test_inner_instructions_point_at_the_pump_instructions(run: Run) -> None:
    for tx in run.txs:
        keys = keys_of(tx)
        pump_indexes = {i for i, _, _ in pump_instructions(tx)}
        for group in tx.inner_instructions:
            assert group["index"] < len(message(tx).instructions)
            for inner in group["instructions"]:
                assert inner["programIdIndex"] < len(keys)
                assert all(a < len(keys) for a in inner["accounts"])
                assert inner["stackHeight"] >= 2
                base58.b58decode(inner["data"])
        assert pump_indexes <= {group["index"] for group in tx.inner_instructions}


def test_token_balances_have_the_mainnet_shape_and_match_the_writes(run: Run) -> None:
    for tx in run.txs:
        keys, writes = keys_of(tx), dict(tx.account_writes)
        assert tx.post_token_balances
        for entry in tx.pre_token_balances + tx.post_token_balances:
            assert set(entry) == {"accountIndex", "mint", "owner", "programId", "uiTokenAmount"}
            assert set(entry["uiTokenAmount"]) == {"amount", "decimals", "uiAmount", "uiAmountString"}
        for entry in tx.post_token_balances:
            account = writes[keys[entry["accountIndex"]]]
            assert str(account.owner) == entry["programId"]
            assert spl.decode_token_account_amount(bytes(account.data)) == int(entry["uiTokenAmount"]["amount"])
            assert Pubkey.from_bytes(bytes(account.data)[:32]) == Pubkey.from_string(entry["mint"])
            assert Pubkey.from_bytes(bytes(account.data)[32:64]) == Pubkey.from_string(entry["owner"])
        indexes = [e["accountIndex"] for e in tx.post_token_balances]
        assert indexes == sorted(indexes)


def test_created_mints_are_real_token_mints(run: Run) -> None:
    classic = v2 = 0
    for tx in run.txs:
        writes = dict(tx.account_writes)
        for _, accounts, data in pump_instructions(tx):
            if kind_of(data) == "create":
                mint = writes[accounts[0]]
                assert mint.owner == TOKEN_PROGRAM_ID and len(mint.data) == 82
                parsed = Mint.from_bytes(bytes(mint.data))
                assert (parsed.supply, parsed.decimals, parsed.mint_authority) == (TOKEN_TOTAL_SUPPLY, 6, None)
                classic += 1
            elif kind_of(data) == "create_v2":
                mint = writes[accounts[0]]
                assert mint.owner == TOKEN_2022_PROGRAM_ID
                assert Mint.from_bytes(bytes(mint.data)[:82]).supply == TOKEN_TOTAL_SUPPLY
                assert bytes(mint.data)[165] == 1
                v2 += 1
    assert classic and v2


def test_graduation_creates_a_pool_through_create_pool(run: Run) -> None:
    migrations = [tx for tx in run.txs if inner_create_pools(tx)]
    assert migrations
    for tx in migrations:
        (data,) = inner_create_pools(tx)
        args = decode_amm_instruction(data)
        (event,) = [e for e in inner_events(tx, PUMP_AMM_PROGRAM_ID) if isinstance(e, CreatePoolEvent)]
        assert (args.base_amount_in, args.quote_amount_in) == (event.base_amount_in, event.quote_amount_in)
        writes = dict(tx.account_writes)
        pool_quote = writes[pda.associated_token_address(event.pool, WSOL_MINT, TOKEN_PROGRAM_ID)]
        assert spl.decode_token_account_amount(bytes(pool_quote.data)) == event.quote_amount_in
        assert 80 * 10**9 < event.quote_amount_in < 86 * 10**9  # about 85 SOL of a completed curve


def test_signal_fields_can_be_read_from_a_create(run: Run) -> None:
    """What the signal classifier will extract: program, signature, mint, accounts, quote asset, curve type."""
    for tx in run.txs:
        for _, accounts, data in pump_instructions(tx):
            kind = kind_of(data)
            if kind not in ("create", "create_v2"):
                continue
            (event,) = [e for e in inner_events(tx, PUMP_PROGRAM_ID) if isinstance(e, CreateEvent)]
            assert event.mint == accounts[0]
            curve_type = "classic" if kind == "create" else "v2"
            quote_asset = "SOL" if curve_type == "classic" else str(accounts[16]) if len(accounts) > 16 else "SOL"
            assert quote_asset in ("SOL", str(WSOL_MINT), str(USDC_MINT))
            if quote_asset == str(USDC_MINT):
                assert event.quote_mint == USDC_MINT
            elif quote_asset == str(WSOL_MINT):  # a SOL coin, or a curve whose own quote mint is wSOL
                assert event.quote_mint in (Pubkey.default(), WSOL_MINT)
            else:
                assert event.quote_mint == Pubkey.default()
            assert tx.transaction.signatures[0] == Signature.from_string(str(tx.transaction.signatures[0]))


def test_traders_are_funded_once() -> None:
    chain = StandInChain()
    feed = LaunchFeed(chain, clock=lambda: NOW)
    feed.next_transactions()
    funded = len(chain.airdrops)
    assert funded == TRADER_COUNT + 1  # the traders and the migration wallet
    assert {pubkey for pubkey, _ in chain.airdrops} >= set(feed.traders)
    for _ in range(5):
        feed.next_transactions()
    assert len(chain.airdrops) == funded


async def test_start_and_stop_inject_in_the_background() -> None:
    chain = StandInChain()
    feed = LaunchFeed(chain, interval_ms=5, clock=lambda: NOW)
    await feed.start()
    for _ in range(200):
        await asyncio.sleep(0.01)
        if len(chain.injected) >= 5:
            break
    await feed.stop()
    count = len(chain.injected)
    assert count >= 5
    await asyncio.sleep(0.05)
    assert len(chain.injected) == count


# ------------------------------------------------------------------ restarts: new coins, the same wallets


def created_mints(txs: list[InjectedTransaction]) -> list[Pubkey]:
    """The mint of every CreateEvent the transactions log, in order."""
    return [
        event.mint
        for tx in txs
        for line in tx.log_messages
        if line.startswith("Program data: ") and isinstance(event := decode_program_data_log(line), CreateEvent)
    ]


def steps(feed: LaunchFeed, chain: StandInChain, count: int) -> list[InjectedTransaction]:
    txs = []
    for _ in range(count):
        for tx in feed.next_transactions():
            chain.inject(tx)
            txs.append(tx)
    return txs


def test_a_restarted_feed_launches_new_coins_with_the_same_wallets(tmp_path: Path) -> None:
    run_file = tmp_path / "feed.json"
    chain = StandInChain()
    first = LaunchFeed(chain, clock=lambda: NOW, run_file=run_file)
    before = created_mints(steps(first, chain, 40))
    again = LaunchFeed(chain, clock=lambda: NOW, run_file=run_file)  # the devnode started again
    after = created_mints(steps(again, chain, 40))
    assert (first.run, again.run) == (0, 1)
    assert again.traders == first.traders
    assert len(before) >= 3 and len(after) >= 3
    assert len(set(before + after)) == len(before) + len(after)


def test_a_crash_still_moves_the_next_start_to_a_new_run(tmp_path: Path) -> None:
    """The run is counted when the feed starts: a chain that lost what the last run wrote (no state saved)
    still gets new coins, so a gateway that logged the lost run's signals never sees a mint twice."""
    run_file = tmp_path / "feed.json"
    crashed = StandInChain()
    lost = created_mints(steps(LaunchFeed(crashed, clock=lambda: NOW, run_file=run_file), crashed, 40))
    chain = StandInChain()
    after = created_mints(steps(LaunchFeed(chain, clock=lambda: NOW, run_file=run_file), chain, 40))
    assert lost and after and not set(lost) & set(after)


def test_a_mint_the_chain_already_holds_is_never_created_again() -> None:
    """Without a run file (run 0 every time) the chain's accounts still keep a second feed off the first's coins."""
    chain = StandInChain()
    before = created_mints(steps(LaunchFeed(chain, clock=lambda: NOW), chain, 40))
    after = created_mints(steps(LaunchFeed(chain, clock=lambda: NOW), chain, 40))
    assert before and after and not set(before) & set(after)

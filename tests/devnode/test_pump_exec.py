"""pump.fun buys and sells that users sign, executed by the devnode (devnode/pump_exec/).

A devnode of this module's own, without its timed feed: the launch feed (`LaunchFeed`) is stepped by the tests
(`_Market.step`), so coins exist and nothing trades between reading a curve and trading on it; amounts can be
checked exactly. Every transaction is built with `pumpfun`, signed with solders and sent over JSON-RPC with
solana-py's AsyncClient. `test_pump_exec_feed.py` trades while the feed runs on its timer.
"""

from __future__ import annotations

import base64
import math
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from solana.rpc.async_api import AsyncClient
from solana.rpc.commitment import Confirmed
from solana.rpc.core import RPCException
from solana.rpc.models import TxOpts
from solders.compute_budget import set_compute_unit_limit, set_compute_unit_price
from solders.instruction import AccountMeta, Instruction
from solders.keypair import Keypair
from solders.message import MessageV0
from solders.pubkey import Pubkey
from solders.signature import Signature
from solders.system_program import TransferParams, transfer
from solders.transaction import VersionedTransaction
from solders.transaction_status import InstructionErrorCustom, TransactionErrorInstructionError

from devnode.feed import LaunchFeed
from devnode.node import Devnode
from pumpfun import pda, spl
from pumpfun.accounts import BondingCurve, Global, decode_bonding_curve, decode_global
from pumpfun.curve import BuyQuote, SellQuote, buy_quote, buy_tokens_out, sell_quote
from pumpfun.errors import AnchorError, PumpError
from pumpfun.events import CompleteEvent, CreateEvent, Event, TradeEvent, decode_program_data_log
from pumpfun.fees import buyback_fee_recipients, fee_rates, fee_recipients
from pumpfun.ids import TOKEN_2022_PROGRAM_ID, TOKEN_PROGRAM_ID, WSOL_MINT
from pumpfun.instructions import (
    BuyArgs,
    SellArgs,
    associated_token_account_instruction,
    buy_instruction,
    sell_instruction,
)
from tests.chain import wait_landed
from tests.devnode.helpers import start_node
from tests.feed import node_rpc

LAMPORTS_PER_SOL = 1_000_000_000
CU_LIMIT = 300_000
CU_PRICE = 10_000  # micro-lamports
FEE = 5_000 + math.ceil(CU_LIMIT * CU_PRICE / 1_000_000)
MEMO_PROGRAM_ID = Pubkey.from_string("MemoSq4gqABAXKb96qnH8TysNcWxMyWCqXgDLGmfcHr")


# --------------------------------------------------------------------------------------------- the market


@dataclass(frozen=True)
class PumpCoin:
    """A coin the feed created, as a client learns it from the CreateEvent."""

    mint: Pubkey
    token_program: Pubkey

    @property
    def bonding_curve(self) -> Pubkey:
        return pda.bonding_curve_pda(self.mint)

    @property
    def associated_bonding_curve(self) -> Pubkey:
        return pda.associated_bonding_curve_pda(self.mint, self.token_program)

    def user_ata(self, user: Pubkey) -> Pubkey:
        return pda.associated_token_address(user, self.mint, self.token_program)


class PumpClient:
    """A client of a devnode's RPC, reading what a trader reads and sending what a trader signs."""

    def __init__(self, rpc_url: str, client: AsyncClient) -> None:
        self.rpc_url = rpc_url
        self.client = client

    async def curve(self, coin: PumpCoin) -> BondingCurve:
        return decode_bonding_curve(await self.data(coin.bonding_curve))

    async def global_(self) -> Global:
        return decode_global(await self.data(pda.global_pda()))

    async def data(self, address: Pubkey) -> bytes:
        account = (await self.client.get_account_info(address, Confirmed)).value
        assert account is not None, f"no account {address}"
        return bytes(account.data)

    async def lamports(self, address: Pubkey) -> int:
        return (await self.client.get_balance(address, Confirmed)).value

    async def tokens(self, address: Pubkey) -> int | None:
        account = (await self.client.get_account_info(address, Confirmed)).value
        return None if account is None else spl.decode_token_account_amount(bytes(account.data))

    async def wallet(self, sol: int = 10) -> Keypair:
        kp = Keypair()
        sig = (await self.client.request_airdrop(kp.pubkey(), sol * LAMPORTS_PER_SOL)).value
        await wait_landed(self.client, sig)
        return kp

    async def send(
        self, payer: Keypair, ixs: Sequence[Instruction], *, skip_preflight: bool = True, cu_limit: int = CU_LIMIT
    ) -> Signature:
        """Sign a v0 transaction (no lookup tables) and send it; wait until it landed, failed or not."""
        tx = await self.sign(payer, ixs, cu_limit)
        opts = TxOpts(skip_preflight=skip_preflight, preflight_commitment=Confirmed)
        sig = (await self.client.send_raw_transaction(bytes(tx), opts)).value
        await wait_landed(self.client, sig)
        return sig

    async def sign(self, payer: Keypair, ixs: Sequence[Instruction], cu_limit: int = CU_LIMIT) -> VersionedTransaction:
        """The v0 transaction of `ixs` after SetComputeUnitLimit and SetComputeUnitPrice, signed by `payer`."""
        blockhash = (await self.client.get_latest_blockhash(Confirmed)).value.blockhash
        budget = [set_compute_unit_limit(cu_limit), set_compute_unit_price(CU_PRICE)]
        return VersionedTransaction(MessageV0.try_compile(payer.pubkey(), [*budget, *ixs], [], blockhash), [payer])

    async def transaction(self, sig: Signature) -> dict[str, Any]:
        config = {"encoding": "json", "maxSupportedTransactionVersion": 0, "commitment": "confirmed"}
        tx: dict[str, Any] = await node_rpc(self.rpc_url, "getTransaction", [str(sig), config])
        return tx


class Market(PumpClient):
    """The devnode's chain with a launch feed stepped by hand (`step`), and a client of its RPC."""

    def __init__(self, node: Devnode, client: AsyncClient) -> None:
        super().__init__(node.rpc_url, client)
        self.node = node
        self.feed = LaunchFeed(node.chain, seed=7)
        self.coins: list[PumpCoin] = []

    def step(self, steps: int = 1) -> list[Signature]:
        """Run the feed `steps` times, injecting what it makes, as its timer would."""
        sigs = []
        for _ in range(steps):
            for itx in self.feed.next_transactions():
                sigs.append(self.node.chain.inject(itx))
                for event in program_events(itx.log_messages):
                    if isinstance(event, CreateEvent) and event.quote_mint == Pubkey.default():
                        self.coins.append(PumpCoin(event.mint, event.token_program))
        return sigs

    def live_coin(self, token_program: Pubkey) -> PumpCoin:
        """A coin of `token_program` whose curve is still trading (created by stepping if need be)."""
        for _ in range(400):
            for coin in reversed(self.coins):
                curve = self.curve_now(coin)
                if coin.token_program == token_program and not curve.complete and curve.real_token_reserves > 10**14:
                    return coin
            self.step()
        raise AssertionError(f"the feed made no live coin of {token_program}")

    def curve_now(self, coin: PumpCoin) -> BondingCurve:
        account = self.node.chain.get_account(coin.bonding_curve)
        assert account is not None
        return decode_bonding_curve(bytes(account.data))


def program_events(logs: Sequence[str]) -> list[Event]:
    return [decode_program_data_log(line) for line in logs if line.startswith("Program data: ")]


def trade_events(tx: dict[str, Any]) -> list[TradeEvent]:
    return [e for e in program_events(tx["meta"]["logMessages"]) if isinstance(e, TradeEvent)]


def balance_change(tx: dict[str, Any], address: Pubkey) -> int:
    """post - pre lamports of `address` in the transaction's own meta."""
    keys = tx["transaction"]["message"]["accountKeys"]
    i = keys.index(str(address))
    return int(tx["meta"]["postBalances"][i]) - int(tx["meta"]["preBalances"][i])


def instruction_error(tx: dict[str, Any]) -> Any:
    return tx["meta"]["err"]


# --------------------------------------------------------------------------------------------- building trades


@dataclass(frozen=True)
class Quoted:
    curve: BondingCurve
    global_: Global

    @property
    def rates(self) -> Any:
        return fee_rates(self.global_, self.curve)

    def buy(self, tokens: int) -> BuyQuote:
        return buy_quote(self.curve.reserves, tokens, self.rates)

    def sell(self, tokens: int) -> SellQuote:
        return sell_quote(self.curve.reserves, tokens, self.rates)

    @property
    def fee_recipient(self) -> Pubkey:
        return fee_recipients(self.global_, self.curve)[1]

    @property
    def buyback(self) -> Pubkey:
        return buyback_fee_recipients(self.global_)[2]


async def quoted(market: PumpClient, coin: PumpCoin) -> Quoted:
    return Quoted(await market.curve(coin), await market.global_())


def buy_ixs(user: Pubkey, coin: PumpCoin, q: Quoted, tokens: int, max_sol_cost: int) -> list[Instruction]:
    """What the gateway's executeSnipe builds for a SOL curve: the user's token account, then the buy."""
    return [
        associated_token_account_instruction(user, user, coin.mint, coin.token_program),
        buy_instruction(
            coin.mint,
            user,
            q.curve.creator,
            q.fee_recipient,
            q.buyback,
            BuyArgs(tokens, max_sol_cost),
            coin.token_program,
        ),
    ]


def sell_ix(user: Pubkey, coin: PumpCoin, q: Quoted, tokens: int, min_sol_output: int) -> Instruction:
    return sell_instruction(
        coin.mint,
        user,
        q.curve.creator,
        q.fee_recipient,
        q.buyback,
        SellArgs(tokens, min_sol_output),
        coin.token_program,
    )


def replace_account(ix: Instruction, position: int, pubkey: Pubkey) -> Instruction:
    metas = list(ix.accounts)
    old = metas[position]
    metas[position] = AccountMeta(pubkey, old.is_signer, old.is_writable)
    return Instruction(ix.program_id, bytes(ix.data), metas)


# --------------------------------------------------------------------------------------------- fixtures


@pytest.fixture(scope="module")
async def market(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Market]:
    node = await start_node(Path(tmp_path_factory.mktemp("pump-exec")) / "devnode")
    try:
        async with AsyncClient(node.rpc_url) as client:
            m = Market(node, client)
            m.step(3)  # the Global account, the traders' airdrops, the first coins
            yield m
    finally:
        await node.stop()


# --------------------------------------------------------------------------------------------- buys and sells


@pytest.mark.parametrize("token_program", [TOKEN_PROGRAM_ID, TOKEN_2022_PROGRAM_ID], ids=["spl-token", "token-2022"])
async def test_a_buy_then_sells_move_exactly_what_the_curve_math_says(market: Market, token_program: Pubkey) -> None:
    coin = market.live_coin(token_program)
    user = await market.wallet()
    u = user.pubkey()
    q = await quoted(market, coin)
    tokens = buy_tokens_out(q.curve.reserves, LAMPORTS_PER_SOL // 2, q.rates)
    quote = q.buy(tokens)
    abc_before = await market.tokens(coin.associated_bonding_curve)
    assert abc_before is not None

    sig = await market.send(user, buy_ixs(u, coin, q, tokens, quote.total_cost))
    tx = await market.transaction(sig)
    assert instruction_error(tx) is None, tx["meta"]["logMessages"]
    assert await market.tokens(coin.user_ata(u)) == tokens
    ata = (await market.client.get_account_info(coin.user_ata(u), Confirmed)).value
    assert ata is not None and ata.owner == token_program
    assert len(ata.data) == (spl.TOKEN_2022_ACCOUNT_SIZE if token_program == TOKEN_2022_PROGRAM_ID else 165)
    rent = spl.rent_exempt_minimum(len(ata.data))
    assert balance_change(tx, u) == -(quote.total_cost + FEE + rent)
    assert balance_change(tx, q.fee_recipient) == quote.protocol_fee
    assert balance_change(tx, pda.creator_vault_pda(q.curve.creator)) == quote.creator_fee
    assert balance_change(tx, coin.bonding_curve) == quote.sol_amount
    assert (await market.curve(coin)).reserves == quote.after
    assert await market.tokens(coin.associated_bonding_curve) == abc_before - tokens
    [event] = trade_events(tx)
    assert (event.is_buy, event.user, event.token_amount, event.sol_amount) == (True, u, tokens, quote.sol_amount)
    assert (event.fee, event.creator_fee, event.fee_recipient) == (
        quote.protocol_fee,
        quote.creator_fee,
        q.fee_recipient,
    )
    assert event.virtual_token_reserves == quote.after.virtual_token_reserves
    assert "Program log: Instruction: Buy" in tx["meta"]["logMessages"]
    post_tokens = {b["owner"]: b["uiTokenAmount"]["amount"] for b in tx["meta"]["postTokenBalances"]}
    assert post_tokens[str(u)] == str(tokens)

    for part in (tokens // 3, tokens - tokens // 3):  # part, then all that is left
        q = await quoted(market, coin)
        sold = q.sell(part)
        sig = await market.send(user, [sell_ix(u, coin, q, part, sold.sol_out)])
        tx = await market.transaction(sig)
        assert instruction_error(tx) is None, tx["meta"]["logMessages"]
        assert balance_change(tx, u) == sold.sol_out - FEE
        assert balance_change(tx, coin.bonding_curve) == -sold.sol_amount
        assert balance_change(tx, q.fee_recipient) == sold.protocol_fee
        assert (await market.curve(coin)).reserves == sold.after
        [event] = trade_events(tx)
        assert (event.is_buy, event.token_amount, event.sol_amount) == (False, part, sold.sol_amount)
    assert await market.tokens(coin.user_ata(u)) == 0
    assert await market.tokens(coin.associated_bonding_curve) == abc_before


async def test_slippage_fails_on_chain_with_the_programs_error_and_costs_only_the_fee(market: Market) -> None:
    coin = market.live_coin(TOKEN_PROGRAM_ID)
    user = await market.wallet()
    u = user.pubkey()
    q = await quoted(market, coin)
    tokens = 10**12
    quote = q.buy(tokens)
    before = await market.lamports(u)

    sig = await market.send(user, buy_ixs(u, coin, q, tokens, quote.total_cost - 1))
    tx = await market.transaction(sig)
    assert instruction_error(tx) == {"InstructionError": [3, {"Custom": PumpError.TooMuchSolRequired}]}
    logs = tx["meta"]["logMessages"]
    assert any("Error Code: TooMuchSolRequired. Error Number: 6002" in line for line in logs), logs
    assert logs[-1] == "Program 6EF8rrecthR5Dkzon8Nwu78hRvfCKubJ14M5uBEwF6P failed: custom program error: 0x1772"
    assert await market.lamports(u) == before - FEE
    assert await market.tokens(coin.user_ata(u)) is None  # the ATA creation went with the failed transaction
    assert (await market.curve(coin)).reserves == q.curve.reserves

    sig = await market.send(user, buy_ixs(u, coin, q, tokens, quote.total_cost))
    assert instruction_error(await market.transaction(sig)) is None
    q = await quoted(market, coin)
    sold = q.sell(tokens)
    before = await market.lamports(u)
    sig = await market.send(user, [sell_ix(u, coin, q, tokens, sold.sol_out + 1)])
    tx = await market.transaction(sig)
    assert instruction_error(tx) == {"InstructionError": [2, {"Custom": PumpError.TooLittleSolReceived}]}
    assert await market.lamports(u) == before - FEE
    assert await market.tokens(coin.user_ata(u)) == tokens
    assert (await market.curve(coin)).reserves == q.curve.reserves


async def test_with_preflight_a_failing_buy_is_refused_and_nothing_is_recorded(market: Market) -> None:
    coin = market.live_coin(TOKEN_PROGRAM_ID)
    user = await market.wallet()
    u = user.pubkey()
    q = await quoted(market, coin)
    tx = await market.sign(user, buy_ixs(u, coin, q, 10**12, 1))
    before = await market.lamports(u)
    with pytest.raises(RPCException) as raised:
        await market.client.send_raw_transaction(bytes(tx), TxOpts(preflight_commitment=Confirmed))
    error = raised.value.args[0]
    assert (
        error.message == "Transaction simulation failed: Error processing Instruction 3: custom program error: 0x1772"
    )
    assert error.data.err == TransactionErrorInstructionError(3, InstructionErrorCustom(PumpError.TooMuchSolRequired))
    assert any("Error Code: TooMuchSolRequired" in line for line in error.data.logs)
    async with aiohttp.ClientSession() as http:  # the JSON-RPC error itself, as a node sends it
        body = {"jsonrpc": "2.0", "id": 1, "method": "sendTransaction", "params": [_b64(tx), {"encoding": "base64"}]}
        async with http.post(market.node.rpc_url, json=body) as resp:
            answer = await resp.json()
    assert answer["error"]["code"] == -32002
    assert answer["error"]["data"]["err"] == {"InstructionError": [3, {"Custom": 6002}]}
    assert answer["error"]["data"]["logs"] == list(error.data.logs)
    assert (await market.client.get_signature_statuses([tx.signatures[0]])).value[0] is None
    assert await market.lamports(u) == before


def _b64(tx: VersionedTransaction) -> str:
    return base64.b64encode(bytes(tx)).decode()


async def test_a_wrong_creator_vault_fails_the_anchor_seeds_constraint(market: Market) -> None:
    coin = market.live_coin(TOKEN_PROGRAM_ID)
    user = await market.wallet()
    u = user.pubkey()
    q = await quoted(market, coin)
    ata, buy = buy_ixs(u, coin, q, 10**12, LAMPORTS_PER_SOL)
    wrong = pda.creator_vault_pda(u)
    sig = await market.send(user, [ata, replace_account(buy, 9, wrong)])
    tx = await market.transaction(sig)
    assert instruction_error(tx) == {"InstructionError": [3, {"Custom": AnchorError.ConstraintSeeds}]}
    logs = tx["meta"]["logMessages"]
    assert any("AnchorError caused by account: creator_vault. Error Code: ConstraintSeeds" in line for line in logs)
    assert f"Program log: {wrong}" in logs
    assert f"Program log: {pda.creator_vault_pda(q.curve.creator)}" in logs
    assert (await market.curve(coin)).reserves == q.curve.reserves


async def test_a_fee_recipient_not_in_the_global_fails_not_authorized(market: Market) -> None:
    coin = market.live_coin(TOKEN_PROGRAM_ID)
    user = await market.wallet()
    q = await quoted(market, coin)
    ata, buy = buy_ixs(user.pubkey(), coin, q, 10**12, LAMPORTS_PER_SOL)
    sig = await market.send(user, [ata, replace_account(buy, 1, Keypair().pubkey())])
    tx = await market.transaction(sig)
    assert instruction_error(tx) == {"InstructionError": [3, {"Custom": PumpError.NotAuthorized}]}


async def test_a_buy_beyond_the_wallet_fails_in_the_system_transfer(market: Market) -> None:
    coin = market.live_coin(TOKEN_PROGRAM_ID)
    user = await market.wallet(sol=1)
    u = user.pubkey()
    q = await quoted(market, coin)
    tokens = buy_tokens_out(q.curve.reserves, 2 * LAMPORTS_PER_SOL, q.rates)
    sig = await market.send(user, buy_ixs(u, coin, q, tokens, 3 * LAMPORTS_PER_SOL))
    tx = await market.transaction(sig)
    assert instruction_error(tx) == {"InstructionError": [3, {"Custom": 1}]}
    logs = tx["meta"]["logMessages"]
    assert any(line.startswith("Transfer: insufficient lamports") for line in logs), logs
    assert await market.lamports(u) == LAMPORTS_PER_SOL - FEE


async def test_a_sell_beyond_the_holding_and_a_buy_beyond_its_compute_limit_fail(market: Market) -> None:
    coin = market.live_coin(TOKEN_PROGRAM_ID)
    user = await market.wallet()
    u = user.pubkey()
    q = await quoted(market, coin)
    tokens = 10**12
    sig = await market.send(user, buy_ixs(u, coin, q, tokens, q.buy(tokens).total_cost), cu_limit=40_000)
    tx = await market.transaction(sig)
    assert instruction_error(tx) == {"InstructionError": [3, "ComputationalBudgetExceeded"]}
    assert tx["meta"]["computeUnitsConsumed"] == 40_000

    sig = await market.send(user, buy_ixs(u, coin, q, tokens, q.buy(tokens).total_cost))
    assert instruction_error(await market.transaction(sig)) is None
    q = await quoted(market, coin)
    sig = await market.send(user, [sell_ix(u, coin, q, tokens + 1, 0)])
    tx = await market.transaction(sig)
    assert instruction_error(tx) == {"InstructionError": [2, {"Custom": PumpError.NotEnoughTokensToSell}]}
    assert await market.tokens(coin.user_ata(u)) == tokens


async def test_wrapped_sol_around_a_buy_and_an_unsupported_instruction(market: Market) -> None:
    """The wSOL shape of a v2 curve's buy (create the wSOL ATA, fund it, SyncNative, buy, CloseAccount) runs;
    an instruction the devnode cannot emulate next to pump fails the transaction, saying so."""
    coin = market.live_coin(TOKEN_2022_PROGRAM_ID)
    user = await market.wallet()
    u = user.pubkey()
    q = await quoted(market, coin)
    tokens = 10**12
    quote = q.buy(tokens)
    wsol = pda.associated_token_address(u, WSOL_MINT, TOKEN_PROGRAM_ID)
    wrap = [
        associated_token_account_instruction(u, u, WSOL_MINT, TOKEN_PROGRAM_ID),
        transfer(TransferParams(from_pubkey=u, to_pubkey=wsol, lamports=LAMPORTS_PER_SOL)),
        Instruction(TOKEN_PROGRAM_ID, spl.token_sync_native_data(), [AccountMeta(wsol, False, True)]),
    ]
    close = Instruction(
        TOKEN_PROGRAM_ID,
        bytes([9]),
        [AccountMeta(wsol, False, True), AccountMeta(u, False, True), AccountMeta(u, True, False)],
    )
    sig = await market.send(user, [*wrap, *buy_ixs(u, coin, q, tokens, quote.total_cost), close])
    tx = await market.transaction(sig)
    assert instruction_error(tx) is None, tx["meta"]["logMessages"]
    ata_rent = spl.rent_exempt_minimum(spl.TOKEN_2022_ACCOUNT_SIZE)
    assert balance_change(tx, u) == -(quote.total_cost + FEE + ata_rent)
    assert (await market.client.get_account_info(wsol, Confirmed)).value is None
    assert "Program log: Instruction: SyncNative" in tx["meta"]["logMessages"]

    q = await quoted(market, coin)
    memo = Instruction(MEMO_PROGRAM_ID, b"hello", [])
    sig = await market.send(user, [memo, sell_ix(u, coin, q, tokens, 0)])
    tx = await market.transaction(sig)
    assert instruction_error(tx) == {"InstructionError": [2, "UnsupportedProgramId"]}
    assert any(line.startswith("devnode: cannot emulate") for line in tx["meta"]["logMessages"])
    assert await market.tokens(coin.user_ata(u)) == tokens


async def test_simulation_reports_the_sends_logs_and_changes_nothing(market: Market) -> None:
    coin = market.live_coin(TOKEN_PROGRAM_ID)
    user = await market.wallet()
    u = user.pubkey()
    q = await quoted(market, coin)
    tokens = 10**12
    tx = await market.sign(user, buy_ixs(u, coin, q, tokens, q.buy(tokens).total_cost))
    before = await market.lamports(u)
    simulated = (await market.client.simulate_transaction(tx, inner_instructions=True)).value
    assert simulated.err is None
    assert await market.lamports(u) == before
    assert await market.tokens(coin.user_ata(u)) is None
    assert (await market.curve(coin)).reserves == q.curve.reserves

    sig = (await market.client.send_raw_transaction(bytes(tx), TxOpts(preflight_commitment=Confirmed))).value
    await wait_landed(market.client, sig)
    sent = (await market.transaction(sig))["meta"]
    simulated_logs = list(simulated.logs or [])

    def without_timestamps(logs: list[str]) -> list[Any]:  # the block time may move between the two calls
        return [_untimed(decode_program_data_log(line)) if line.startswith("Program data: ") else line for line in logs]

    assert without_timestamps(simulated_logs) == without_timestamps(sent["logMessages"])
    assert simulated.units_consumed == sent["computeUnitsConsumed"]
    assert simulated.inner_instructions is not None
    assert len(simulated.inner_instructions) == len(sent["innerInstructions"])


def _untimed(event: Event) -> Event:
    return replace(event, timestamp=0, last_update_timestamp=0) if isinstance(event, TradeEvent) else event


async def test_the_buy_that_takes_the_last_token_completes_the_curve_and_the_feed_graduates_it(market: Market) -> None:
    coin = market.live_coin(TOKEN_PROGRAM_ID)
    user = await market.wallet(sol=200)
    u = user.pubkey()
    q = await quoted(market, coin)
    remaining = q.curve.real_token_reserves
    quote = q.buy(remaining)
    sig = await market.send(user, buy_ixs(u, coin, q, remaining, quote.total_cost))
    tx = await market.transaction(sig)
    assert instruction_error(tx) is None, tx["meta"]["logMessages"]
    curve = await market.curve(coin)
    assert curve.complete and curve.real_token_reserves == 0
    assert any(isinstance(e, CompleteEvent) for e in program_events(tx["meta"]["logMessages"]))

    q = await quoted(market, coin)
    sig = await market.send(user, [sell_ix(u, coin, q, 10**9, 0)])
    assert instruction_error(await market.transaction(sig)) == {
        "InstructionError": [2, {"Custom": PumpError.BondingCurveComplete}]
    }
    migrated = False
    for _ in range(5):
        for sig in market.step():
            logs = market.node.chain.txs[sig].log_messages
            migrated |= "Program log: Instruction: Migrate" in logs and str(coin.mint) in str(
                market.node.chain.txs[sig].account_keys
            )
    assert migrated, "the feed did not graduate the curve the user completed"


# --------------------------------------------------------------------------------------------- the feed afterwards


async def test_the_feed_trades_on_from_the_users_trade_and_leaves_the_users_accounts_alone(market: Market) -> None:
    coin = market.live_coin(TOKEN_PROGRAM_ID)
    user = await market.wallet()
    u = user.pubkey()
    q = await quoted(market, coin)
    tokens = buy_tokens_out(q.curve.reserves, 2 * LAMPORTS_PER_SOL, q.rates)
    sig = await market.send(user, buy_ixs(u, coin, q, tokens, q.buy(tokens).total_cost))
    assert instruction_error(await market.transaction(sig)) is None
    after_user = await market.curve(coin)
    lamports, held = await market.lamports(u), await market.tokens(coin.user_ata(u))

    feed_trades = []
    for _ in range(300):
        for sig in market.step():
            rec = market.node.chain.txs[sig]
            if coin.bonding_curve in rec.account_keys:
                feed_trades.append(await market.transaction(sig))
        if len(feed_trades) >= 2:
            break
    assert feed_trades, "the feed never traded the coin again"
    first = trade_events(feed_trades[0])[0]
    # The feed's first trade started from the curve as the user's buy left it (the event holds the reserves after).
    sign = 1 if first.is_buy else -1
    assert first.virtual_token_reserves + sign * first.token_amount == after_user.virtual_token_reserves
    assert first.virtual_sol_reserves - sign * first.sol_amount == after_user.virtual_sol_reserves
    for tx in feed_trades:  # no stale absolute writes: each account moved by exactly the trade's amounts
        [event] = trade_events(tx)
        assert balance_change(tx, coin.bonding_curve) == (event.sol_amount if event.is_buy else -event.sol_amount)
        assert balance_change(tx, event.fee_recipient) == event.fee
    assert await market.lamports(u) == lamports
    assert await market.tokens(coin.user_ata(u)) == held

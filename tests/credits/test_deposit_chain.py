"""Deposits end to end on the real local chain (devnode) and the real PostgreSQL: nothing mocked.

Real SPL Token transactions (solana-py + solders) move test USDC into the deposit wallet's USDC token
account; the watcher and confirm-deposit must credit each deposit once, to the transfer's authority.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import sys
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import asyncpg
import orjson
import pytest
from solana.rpc.async_api import AsyncClient
from solders.instruction import Instruction
from solders.keypair import Keypair
from solders.pubkey import Pubkey
from solders.signature import Signature
from solders.system_program import CreateAccountParams, create_account
from solders.system_program import TransferParams as SolTransferParams
from solders.system_program import transfer as sol_transfer
from spl.token.constants import MINT_LEN, TOKEN_PROGRAM_ID
from spl.token.instructions import (
    create_associated_token_account,
    get_associated_token_address,
    initialize_mint2,
    mint_to_checked,
    transfer,
    transfer_checked,
)
from spl.token.models import InitializeMint2Params, MintToCheckedParams, TransferCheckedParams, TransferParams

from devnode.node import Devnode
from gateway.app.settings import Settings
from gateway.core.credits import CreditPolicy
from gateway.core.deposits import REASON_FAILED, REASON_NO_TRANSFER, deposit_token_account
from gateway.core.errors import ProxyError
from gateway.core.upstreams import UpstreamNode
from gateway.credits.chain_reads import NOT_FINALIZED
from gateway.credits.confirm import confirm_deposit
from gateway.credits.watcher import DepositWatcher
from gateway.node.http import HttpUpstream
from gateway.node.pool import NodePool
from tests.chain import (
    USDC_MINT,
    airdrop,
    mint_usdc,
    send,
    submit,
    transfer_usdc_instruction,
    usdc_account,
    wait_landed,
)
from tests.node.followers import followers
from tests.node.test_pool import SETTINGS
from tests.node.test_upstream_failures import Relay

CREDITS_PER_USDC = 100_000
POLICY = CreditPolicy(credits_per_usdc=CREDITS_PER_USDC, credit_expiry_seconds=90 * 86_400)

# --------------------------------------------------------------------------------------- fixtures


@dataclass
class Chain:
    url: str  # the session devnode (tests/conftest.py), 100 ms slots: a transfer is final within ~200 ms
    client: AsyncClient
    usdc_authority: Keypair
    deposit_wallet: Keypair
    deposit_ata: Pubkey
    upstream: HttpUpstream


@pytest.fixture(scope="session")
async def chain(devnode: Devnode) -> AsyncIterator[Chain]:
    """A fresh deposit wallet and its USDC account on the session devnode."""
    devnode_url, authority = devnode.rpc_url, devnode.usdc_mint_authority
    client = AsyncClient(devnode_url)
    upstream = HttpUpstream(devnode_url)
    try:
        payer = await funded(devnode_url)
        wallet = Keypair()
        ata = deposit_token_account(wallet.pubkey(), USDC_MINT)
        assert ata == usdc_account(wallet.pubkey())
        create = create_associated_token_account(payer.pubkey(), wallet.pubkey(), USDC_MINT)
        await send(client, payer, [create], v0=True, finalized=True)  # the watcher reads this one too
        yield Chain(devnode_url, client, authority, wallet, ata, upstream)
    finally:
        await upstream.close()
        await client.close()


@pytest.fixture
def watcher(chain: Chain, pool: asyncpg.Pool) -> DepositWatcher:
    return DepositWatcher(pool, chain.upstream, POLICY, str(chain.deposit_ata), str(USDC_MINT))


# ---------------------------------------------------------------------------------------- helpers


async def wait_for(predicate: Callable[[], Awaitable[bool]], limit_s: float = 10.0) -> None:
    deadline = asyncio.get_running_loop().time() + limit_s
    while not await predicate():
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError("condition not reached in time")
        await asyncio.sleep(0.05)


async def send_finalized(chain: Chain, payer: Keypair, ixs: list[Instruction], *signers: Keypair) -> Signature:
    """A v0 transaction, waited for until finalized: the watcher and confirm-deposit credit only finalized ones."""
    return await send(chain.client, payer, ixs, *signers, v0=True, finalized=True)


async def funded(node_url: str) -> Keypair:
    kp = Keypair()
    await airdrop(node_url, kp.pubkey(), 10 * 10**9)
    return kp


async def wallet_with_usdc(chain: Chain, base_units: int) -> Keypair:
    """A new funded wallet holding ``base_units`` of test USDC in its ATA (minted with MintToChecked)."""
    owner = await funded(chain.url)
    await mint_usdc(chain.client, chain.usdc_authority, owner, owner.pubkey(), base_units)
    return owner


def usdc_transfer(chain: Chain, owner: Keypair, base_units: int) -> Instruction:
    """TransferChecked of ``owner``'s test USDC into the deposit wallet's USDC account."""
    return transfer_usdc_instruction(owner.pubkey(), chain.deposit_wallet.pubkey(), base_units)


async def balance(pool: asyncpg.Pool, pubkey: Keypair | str) -> int:
    key = str(pubkey.pubkey()) if isinstance(pubkey, Keypair) else pubkey
    return int(await pool.fetchval("SELECT COALESCE(sum(amount), 0) FROM ledger_entries WHERE pubkey = $1", key))


async def deposit_row(pool: asyncpg.Pool, sig: Signature | str) -> asyncpg.Record | None:
    row: asyncpg.Record | None = await pool.fetchrow("SELECT * FROM deposits WHERE signature = $1", str(sig))
    return row


async def confirm(chain: Chain, pool: asyncpg.Pool, sig: Signature | str, caller: str | None = None) -> Any:
    return await confirm_deposit(
        pool, chain.upstream, str(sig), POLICY, str(chain.deposit_ata), str(USDC_MINT), caller=caller
    )


# ------------------------------------------------------------------------------------------ tests


async def test_watcher_credits_authority_then_confirm_is_already_processed(
    chain: Chain, pool: asyncpg.Pool, watcher: DepositWatcher
) -> None:
    alice = await wallet_with_usdc(chain, 5_000_000)
    sig = await send_finalized(chain, alice, [usdc_transfer(chain, alice, 1_500_000)])

    assert await watcher.run_once() >= 1
    assert await balance(pool, alice) == 150_000
    row = await deposit_row(pool, sig)
    assert row is not None and row["pubkey"] == str(alice.pubkey()) and row["status"] == "credited"
    assert await watcher.cursor() is not None

    confirmed = await confirm(chain, pool, sig, caller=str(alice.pubkey()))
    assert confirmed.outcome.already_processed and confirmed.outcome.credits_added == 0
    assert confirmed.outcome.new_balance == 150_000
    assert confirmed.credited_pubkey == str(alice.pubkey())
    assert confirmed.to_json()["ok"] is True
    assert await balance(pool, alice) == 150_000


async def test_confirm_first_then_watcher_does_not_credit_again(
    chain: Chain, pool: asyncpg.Pool, watcher: DepositWatcher
) -> None:
    bob = await wallet_with_usdc(chain, 1_000_000)
    sig = await send_finalized(chain, bob, [usdc_transfer(chain, bob, 250_000)])

    confirmed = await confirm(chain, pool, sig, caller=str(bob.pubkey()))
    assert confirmed.outcome.credited and not confirmed.outcome.already_processed
    assert (confirmed.outcome.credits_added, confirmed.outcome.new_balance) == (25_000, 25_000)

    await watcher.run_once()
    assert await balance(pool, bob) == 25_000
    again = await confirm(chain, pool, sig, caller=str(bob.pubkey()))
    assert again.outcome.already_processed and again.outcome.credits_added == 0


async def test_transfer_signed_by_other_wallet_credits_that_wallet_not_the_caller(
    chain: Chain, pool: asyncpg.Pool, watcher: DepositWatcher
) -> None:
    """The fee payer and caller is `caller`; the tokens are B's, B signs as authority: B is credited."""
    caller = await funded(chain.url)
    b = await wallet_with_usdc(chain, 2_000_000)
    sig = await send_finalized(chain, caller, [usdc_transfer(chain, b, 1_000_000)], b)

    confirmed = await confirm(chain, pool, sig, caller=str(caller.pubkey()))
    assert confirmed.credited_pubkey == str(b.pubkey())
    assert confirmed.outcome.credits_added == 100_000
    assert await balance(pool, b) == 100_000
    assert await balance(pool, caller) == 0

    await watcher.run_once()
    assert await balance(pool, b) == 100_000


async def test_plain_transfer_is_credited(chain: Chain, pool: asyncpg.Pool, watcher: DepositWatcher) -> None:
    """A classic `Transfer` names no mint: the destination (the USDC ATA) establishes it."""
    carol = await wallet_with_usdc(chain, 100_000)
    ix = transfer(
        TransferParams(
            program_id=TOKEN_PROGRAM_ID,
            source=usdc_account(carol.pubkey()),
            dest=chain.deposit_ata,
            owner=carol.pubkey(),
            amount=40_000,
        )
    )
    await send_finalized(chain, carol, [ix])
    await watcher.run_once()
    assert await balance(pool, carol) == 4_000


async def test_non_usdc_token_is_ignored(chain: Chain, pool: asyncpg.Pool, watcher: DepositWatcher) -> None:
    """A second mint, its ATA under the deposit wallet, a real TransferChecked: never credited."""
    sender = await funded(chain.url)
    mint = Keypair()
    rent = (await chain.client.get_minimum_balance_for_rent_exemption(MINT_LEN)).value
    setup = [
        create_account(
            CreateAccountParams(
                from_pubkey=sender.pubkey(),
                to_pubkey=mint.pubkey(),
                lamports=rent,
                space=MINT_LEN,
                owner=TOKEN_PROGRAM_ID,
            )
        ),
        initialize_mint2(
            InitializeMint2Params(
                program_id=TOKEN_PROGRAM_ID, mint=mint.pubkey(), decimals=6, mint_authority=sender.pubkey()
            )
        ),
        create_associated_token_account(sender.pubkey(), sender.pubkey(), mint.pubkey()),
        create_associated_token_account(sender.pubkey(), chain.deposit_wallet.pubkey(), mint.pubkey()),
        mint_to_checked(
            MintToCheckedParams(
                program_id=TOKEN_PROGRAM_ID,
                mint=mint.pubkey(),
                dest=get_associated_token_address(sender.pubkey(), mint.pubkey()),
                mint_authority=sender.pubkey(),
                amount=10_000_000,
                decimals=6,
            )
        ),
    ]
    await send_finalized(chain, sender, setup, mint)
    other_ata = get_associated_token_address(chain.deposit_wallet.pubkey(), mint.pubkey())
    move = transfer_checked(
        TransferCheckedParams(
            program_id=TOKEN_PROGRAM_ID,
            source=get_associated_token_address(sender.pubkey(), mint.pubkey()),
            mint=mint.pubkey(),
            dest=other_ata,
            owner=sender.pubkey(),
            amount=5_000_000,
            decimals=6,
        )
    )
    sig = await send_finalized(chain, sender, [move])

    with pytest.raises(ProxyError) as err:
        await confirm(chain, pool, sig, caller=str(sender.pubkey()))
    assert err.value.status == 400 and err.value.constant == "INVALID_REQUEST"
    assert err.value.message == REASON_NO_TRANSFER

    await watcher.run_once()
    assert await deposit_row(pool, sig) is None
    assert await balance(pool, sender) == 0


async def test_sol_transfer_to_deposit_wallet_gives_400(chain: Chain, pool: asyncpg.Pool) -> None:
    sender = await funded(chain.url)
    ix = sol_transfer(
        SolTransferParams(from_pubkey=sender.pubkey(), to_pubkey=chain.deposit_wallet.pubkey(), lamports=10**9)
    )
    sig = await send_finalized(chain, sender, [ix])
    with pytest.raises(ProxyError) as err:
        await confirm(chain, pool, sig)
    assert err.value.status == 400 and err.value.message == REASON_NO_TRANSFER


async def test_below_minimum_is_recorded_ignored(chain: Chain, pool: asyncpg.Pool, watcher: DepositWatcher) -> None:
    dave = await wallet_with_usdc(chain, 100_000)
    sig = await send_finalized(chain, dave, [usdc_transfer(chain, dave, 9_999)])

    await watcher.run_once()
    row = await deposit_row(pool, sig)
    assert row is not None and row["status"] == "ignored" and row["credits"] == 0
    assert row["amount_base_units"] == 9_999
    assert await balance(pool, dave) == 0

    with pytest.raises(ProxyError) as err:  # confirm-deposit says why, and still credits nothing
        await confirm(chain, pool, sig, caller=str(dave.pubkey()))
    assert err.value.status == 400
    assert await balance(pool, dave) == 0


async def test_failed_transfer_gives_400(chain: Chain, pool: asyncpg.Pool, watcher: DepositWatcher) -> None:
    erin = await wallet_with_usdc(chain, 50_000)
    sig = await submit(chain.client, erin, [usdc_transfer(chain, erin, 60_000)], v0=True, skip_preflight=True)
    assert (await wait_landed(chain.client, sig, finalized=True)).err is not None  # landed, and failed
    with pytest.raises(ProxyError) as err:
        await confirm(chain, pool, sig)
    assert err.value.status == 400 and err.value.message == REASON_FAILED
    await watcher.run_once()
    assert await deposit_row(pool, sig) is None and await balance(pool, erin) == 0


async def test_bogus_signatures_give_400(chain: Chain, pool: asyncpg.Pool) -> None:
    for bad in ["", "not-base58!", "abc", "1" * 200]:
        with pytest.raises(ProxyError) as err:
            await confirm(chain, pool, bad)
        assert err.value.status == 400 and err.value.constant == "INVALID_REQUEST"
    unknown = Signature.from_bytes(bytes(range(64)))  # well-formed, never sent
    with pytest.raises(ProxyError) as err:
        await confirm(chain, pool, unknown)
    assert err.value.status == 400 and err.value.message == NOT_FINALIZED


async def test_restarted_watcher_resumes_from_cursor(chain: Chain, pool: asyncpg.Pool, watcher: DepositWatcher) -> None:
    await watcher.run_once()
    cursor = await watcher.cursor()
    fresh = DepositWatcher(pool, chain.upstream, POLICY, str(chain.deposit_ata), str(USDC_MINT))
    assert await fresh.cursor() == cursor
    assert await fresh.run_once() == 0

    frank = await wallet_with_usdc(chain, 1_000_000)
    sig = await send_finalized(chain, frank, [usdc_transfer(chain, frank, 20_000)])
    assert await fresh.run_once() == 1
    assert await fresh.cursor() == str(sig)
    assert await balance(pool, frank) == 2_000


async def test_watcher_pages(chain: Chain, pool: asyncpg.Pool) -> None:
    """Small pages force `before` paging; everything new is still credited oldest first."""
    grace = await wallet_with_usdc(chain, 1_000_000)
    sigs = [await send_finalized(chain, grace, [usdc_transfer(chain, grace, 10_000 + i)]) for i in range(3)]
    paged = DepositWatcher(pool, chain.upstream, POLICY, str(chain.deposit_ata), str(USDC_MINT), page_limit=2)
    await paged.run_once()
    assert await paged.cursor() == str(sigs[-1])
    assert await balance(pool, grace) == sum((10_000 + i) * CREDITS_PER_USDC // 10**6 for i in range(3))


class HoldBack:
    """The devnode, except that ``held`` signatures look only confirmed and ``hidden`` ones unreadable.

    Makes "not finalized yet" deterministic: with 100 ms slots a real transfer is final within ~200 ms.
    """

    def __init__(self, inner: HttpUpstream) -> None:
        self.inner = inner
        self.held: set[str] = set()
        self.hidden: set[str] = set()

    async def post(self, body: bytes, timeout_s: float, *, replayable: bool = False) -> bytes:
        request = orjson.loads(body)
        method, params = request["method"], request["params"]
        if method == "getTransaction" and params[0] in self.hidden:
            return orjson.dumps({"jsonrpc": "2.0", "id": request["id"], "result": None})
        doc = orjson.loads(await self.inner.post(body, timeout_s))
        if method == "getSignaturesForAddress":
            for entry in doc["result"]:
                if entry["signature"] in self.held:
                    entry["confirmationStatus"] = "confirmed"
        elif method == "getSignatureStatuses":
            for sig, status in zip(params[0], doc["result"]["value"], strict=True):
                if status is not None and sig in self.held:
                    status["confirmationStatus"] = "confirmed"
        return orjson.dumps(doc)


async def test_not_finalized_is_not_credited_yet(chain: Chain, pool: asyncpg.Pool, watcher: DepositWatcher) -> None:
    await watcher.run_once()
    before = await watcher.cursor()
    hold = HoldBack(chain.upstream)
    held_watcher = DepositWatcher(pool, hold, POLICY, str(chain.deposit_ata), str(USDC_MINT))
    kim = await wallet_with_usdc(chain, 1_000_000)
    late = await send_finalized(chain, kim, [usdc_transfer(chain, kim, 50_000)])
    after = await send_finalized(chain, kim, [usdc_transfer(chain, kim, 60_000)])
    hold.held.add(str(late))

    assert await held_watcher.run_once() == 0  # stops at the unfinalized one; `after` waits behind it
    assert await held_watcher.cursor() == before
    with pytest.raises(ProxyError) as err:
        await confirm_deposit(pool, hold, str(late), POLICY, str(chain.deposit_ata), str(USDC_MINT))
    assert err.value.status == 400 and err.value.message == NOT_FINALIZED
    assert await balance(pool, kim) == 0

    hold.held.clear()
    assert await held_watcher.run_once() == 2
    assert await held_watcher.cursor() == str(after)
    assert await balance(pool, kim) == 11_000


async def test_unreadable_signature_is_skipped_after_retries(chain: Chain, pool: asyncpg.Pool) -> None:
    """A signature the node lists but will not return must not block later deposits forever."""
    hold = HoldBack(chain.upstream)
    stuck_watcher = DepositWatcher(pool, hold, POLICY, str(chain.deposit_ata), str(USDC_MINT), max_attempts=2)
    await stuck_watcher.run_once()
    leo = await wallet_with_usdc(chain, 1_000_000)
    stuck = await send_finalized(chain, leo, [usdc_transfer(chain, leo, 20_000)])
    later = await send_finalized(chain, leo, [usdc_transfer(chain, leo, 30_000)])
    hold.hidden.add(str(stuck))

    assert await stuck_watcher.run_once() == 0
    assert stuck_watcher.stats.last_error is not None
    assert await stuck_watcher.run_once() == 2  # second attempt: skipped, and `later` credited
    assert stuck_watcher.stats.skipped == [str(stuck)]
    assert await stuck_watcher.cursor() == str(later)
    assert await balance(pool, leo) == 3_000

    hold.hidden.clear()  # still creditable through confirm-deposit
    confirmed = await confirm(chain, pool, stuck, caller=str(leo.pubkey()))
    assert confirmed.outcome.credits_added == 2_000 and await balance(pool, leo) == 5_000


async def test_run_loop_survives_node_outage(
    chain: Chain, pool: asyncpg.Pool, caplog: pytest.LogCaptureFixture
) -> None:
    dead = HttpUpstream("http://127.0.0.1:9")  # nothing listens there
    broken = DepositWatcher(pool, dead, POLICY, str(chain.deposit_ata), str(USDC_MINT), timeout_s=1.0)
    stop = asyncio.Event()
    caplog.set_level(logging.WARNING, logger="gateway.credits.watcher")
    task = asyncio.create_task(broken.run(0.05, stop))
    await wait_for(lambda: _true(broken.stats.polls >= 3))
    assert broken.stats.last_error is not None and not task.done()
    outage_logs = [r for r in caplog.records if "node not usable" in r.getMessage()]
    assert len(outage_logs) == 1, "the same failure on every poll is logged once, not per poll"
    stop.set()
    await asyncio.wait_for(task, 5)
    await dead.close()


async def _true(value: bool) -> bool:
    return value


# --------------------------------------------------------------------------------- the Ray actor


def actor_settings(chain: Chain, database_url: str, home: Path) -> dict[str, Any]:
    """The watcher is given the deposit address only: the wallet's secret is on no serving machine."""
    deposit = str(chain.deposit_wallet.pubkey())
    settings = Settings(home=home, database_url=database_url, upstream_rpc_url=chain.url, deposit_address=deposit)
    return settings.model_dump(mode="json")


async def test_actor_class_without_ray(chain: Chain, pool: asyncpg.Pool, database_url: str, tmp_path: Path) -> None:
    from gateway.credits.watcher_actor import DepositWatcherActor

    ivy = await wallet_with_usdc(chain, 1_000_000)
    sig = await send_finalized(chain, ivy, [usdc_transfer(chain, ivy, 70_000)])
    actor = DepositWatcherActor(actor_settings(chain, database_url, tmp_path), interval_s=0.1)
    try:
        assert actor.deposit_ata == str(chain.deposit_ata)
        await asyncio.to_thread(actor.poll_now)
        await wait_for(lambda: _balance_is(pool, ivy, 7_000))
        status = actor.status()
        assert status["running"] and status["polls"] >= 1
        assert await deposit_row(pool, sig) is not None
    finally:
        await asyncio.to_thread(actor.shutdown)
    assert not actor.status()["running"]


async def _balance_is(pool: asyncpg.Pool, who: Keypair, expected: int) -> bool:
    return await balance(pool, who) == expected


REPO_ROOT = Path(__file__).resolve().parents[2]
RAY_DRIVER = """
import json, sys
import ray
from actors.deposit_watcher import start_deposit_watcher, stop_deposit_watcher

settings = json.loads(sys.argv[1])
ray.init(namespace="gateway", include_dashboard=False, _node_ip_address="127.0.0.1", num_cpus=1)
try:
    handle = start_deposit_watcher(settings, interval_s=0.1)
    again = start_deposit_watcher(settings)  # get_if_exists: the same actor
    assert again._actor_id == handle._actor_id
    print(json.dumps(ray.get(handle.status.remote(), timeout=60)), flush=True)
    sys.stdin.readline()
    print(json.dumps(ray.get(handle.status.remote(), timeout=60)), flush=True)
finally:
    stop_deposit_watcher()
    ray.shutdown()
"""


@pytest.mark.slow
@pytest.mark.integration
async def test_actor_on_ray(chain: Chain, pool: asyncpg.Pool, database_url: str, tmp_path: Path) -> None:
    """The named detached actor, in a Ray driver of its own.

    The Ray driver runs in a process of its own: once the in-process devnode has executed an SBF
    program, LiteSVM leaves the x87 FPU stack of this thread non-empty, long-double math turns to NaN
    and Ray's C++ (a hash-table rehash) aborts with std::bad_alloc at the next task or actor creation.
    The stack runs the devnode as a subprocess, so only same-process tests meet this.
    """
    settings = json.dumps(actor_settings(chain, database_url, tmp_path))
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-c",
        RAY_DRIVER,
        settings,
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        cwd=str(REPO_ROOT),
    )
    assert proc.stdin is not None and proc.stdout is not None
    try:
        first = json.loads(await asyncio.wait_for(proc.stdout.readline(), 180))
        assert first["deposit_ata"] == str(chain.deposit_ata) and first["running"]
        jack = await wallet_with_usdc(chain, 1_000_000)
        await send_finalized(chain, jack, [usdc_transfer(chain, jack, 80_000)])
        await wait_for(lambda: _balance_is(pool, jack, 8_000), limit_s=60)
        proc.stdin.write(b"done\n")
        await proc.stdin.drain()
        last = json.loads(await asyncio.wait_for(proc.stdout.readline(), 60))
        assert last["running"] and last["deposits_credited"] >= 1
        assert await asyncio.wait_for(proc.wait(), 60) == 0
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()


async def test_a_pass_reads_one_nodes_view_so_a_node_behind_never_skips_a_deposit(
    chain: Chain, pool: asyncpg.Pool, tmp_path: Path
) -> None:
    """The node first for reads (the devnode, behind a relay) fails ``getTransaction`` while a deposit is new;
    the pool's other node, a real follower process, is 40 slots behind. Had the pass fetched the signature the
    first node listed from the node behind, it would have read null, "not readable", and with one attempt
    allowed skipped the deposit; read from one node, the pass stops and the deposit is credited once later."""

    dave = await wallet_with_usdc(chain, 30_000)
    await DepositWatcher(pool, chain.upstream, POLICY, str(chain.deposit_ata), str(USDC_MINT)).run_once()
    relay = Relay(chain.url)
    await relay.start()
    async with followers(chain.url, tmp_path) as nodes:
        await nodes.start("behind", lag_slots=40)
        first = UpstreamNode(name="first", rpc_url=f"http://127.0.0.1:{relay.port}/")
        nodes_pool = NodePool([first, nodes.entry("behind")], SETTINGS)
        watcher = DepositWatcher(pool, nodes_pool, POLICY, str(chain.deposit_ata), str(USDC_MINT), max_attempts=1)
        try:
            relay.cut_methods = {"getTransaction"}
            sig = await send_finalized(chain, dave, [usdc_transfer(chain, dave, 30_000)])
            for _ in range(3):  # passes while the first node fails getTransaction: none skips the deposit
                with contextlib.suppress(Exception):
                    await watcher.run_once()
            assert relay.calls["getTransaction"] >= 1
            relay.cut_methods = set()

            async def credited() -> bool:
                with contextlib.suppress(Exception):
                    await watcher.run_once()
                return await deposit_row(pool, sig) is not None

            await wait_for(credited, limit_s=30.0)
        finally:
            await nodes_pool.close()
            await relay.stop()
    assert watcher.stats.skipped == []
    assert await balance(pool, dave) == 3_000

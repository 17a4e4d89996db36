"""The leader's replication log without sockets: what it keeps (a window of slots and a base), what a reader
that does not read gets (cut off), and that a chain rebuilt from its frames answers as the leader does."""

from __future__ import annotations

from typing import Any

import pytest
from solders.account import Account
from solders.compute_budget import set_compute_unit_price
from solders.hash import Hash
from solders.instruction import AccountMeta, Instruction
from solders.keypair import Keypair
from solders.message import MessageV0
from solders.pubkey import Pubkey
from solders.system_program import TransferParams, transfer
from solders.token.associated import get_associated_token_address
from solders.transaction import VersionedTransaction

from devnode.chain import Chain
from devnode.chain.constants import USDC_MINT
from devnode.injected import InjectedTransaction
from devnode.replication.follower import apply_event
from devnode.replication.frames import Base, Hello, Live, decode
from devnode.replication.log import Reader, ReplicationLog
from devnode.rpc import NodeInfo, RpcDispatcher
from devnode.sol_usd_pool import SOL_USD_POOL, install_sol_usd_pool
from devnode.tokens import ATA_PROGRAM_ID, TOKEN_PROGRAM_ID

SOL = 10**9


def leader_chain(authority: Keypair) -> Chain:
    chain = Chain(retention_slots=10_000, usdc_mint_authority=authority.pubkey())
    install_sol_usd_pool(chain)
    return chain


def follower_chain() -> Chain:
    return Chain(retention_slots=10_000, usdc_mint_authority=Pubkey.default())


def sync(log: ReplicationLog, follower: Chain, reader: Reader | None = None) -> Reader:
    """What a follower does with the frames: load the base, apply every event (no lag)."""
    if reader is None:
        frames, opened = log.open_reader(None, None, None)
        assert opened is not None
        reader = opened
    else:
        frames = []
    while True:
        for raw in frames:
            frame = decode(raw)
            if isinstance(frame, Base):
                follower.load_replica(frame.snapshot)
            elif not isinstance(frame, Hello | Live):
                apply_event(follower, frame)
        frames = log.read(reader)
        if not frames:
            return reader


def ask(chain: Chain, method: str, *params: Any) -> Any:
    dispatcher = RpcDispatcher(chain, NodeInfo("127.0.0.1", 0, 0, 100))
    return dispatcher.handle({"jsonrpc": "2.0", "id": 1, "method": method, "params": list(params)})


def signed(chain: Chain, payer: Keypair, ixs: list[Instruction], *extra: Keypair) -> VersionedTransaction:
    msg = MessageV0.try_compile(payer.pubkey(), ixs, [], chain.latest_blockhash())
    return VersionedTransaction(msg, [payer, *extra])


def create_ata(payer: Pubkey, owner: Pubkey) -> Instruction:
    ata = get_associated_token_address(owner, USDC_MINT)
    metas = [
        AccountMeta(payer, True, True),
        AccountMeta(ata, False, True),
        AccountMeta(owner, False, False),
        AccountMeta(USDC_MINT, False, False),
        AccountMeta(Pubkey.default(), False, False),
        AccountMeta(TOKEN_PROGRAM_ID, False, False),
    ]
    return Instruction(ATA_PROGRAM_ID, bytes([1]), metas)


def mint_to(dest: Pubkey, authority: Pubkey, amount: int) -> Instruction:
    metas = [AccountMeta(USDC_MINT, False, True), AccountMeta(dest, False, True), AccountMeta(authority, True, False)]
    return Instruction(TOKEN_PROGRAM_ID, bytes([7]) + amount.to_bytes(8, "little"), metas)


def busy_slots(chain: Chain, authority: Keypair) -> tuple[Keypair, list[str]]:
    """A few slots of every kind of write: airdrops, a token mint with a priority fee, a failed transfer,
    an injected transaction, a genesis write. The payer and the signatures."""
    payer = Keypair()
    sigs = [str(chain.airdrop(payer.pubkey(), 5 * SOL))]
    chain.tick()
    ata = get_associated_token_address(payer.pubkey(), USDC_MINT)
    ixs = [
        set_compute_unit_price(5_000),
        create_ata(payer.pubkey(), payer.pubkey()),
        mint_to(ata, authority.pubkey(), 7),
    ]
    sigs.append(str(chain.send(signed(chain, payer, ixs, authority))))
    too_much = transfer(TransferParams(from_pubkey=payer.pubkey(), to_pubkey=Keypair().pubkey(), lamports=50 * SOL))
    sigs.append(str(chain.send(signed(chain, payer, [too_much]), skip_preflight=True)))
    chain.tick()
    program, state = Pubkey.new_unique(), Pubkey.new_unique()
    ix = Instruction(program, b"\x01", [AccountMeta(payer.pubkey(), True, True), AccountMeta(state, False, True)])
    injected = InjectedTransaction(
        transaction=signed(chain, payer, [ix]),
        log_messages=[f"Program {program} invoke [1]", f"Program {program} success"],
        inner_instructions=[],
        account_writes=[(state, Account(2_000_000, b"state", program))],
    )
    sigs.append(str(chain.inject(injected)))
    chain.set_genesis_account(Pubkey.new_unique(), Account(1, b"written outside", Pubkey.default()))
    chain.tick()
    chain.tick()
    chain.tick()
    return payer, sigs


def assert_same_answers(leader: Chain, follower: Chain, payer: Keypair, sigs: list[str]) -> None:
    assert follower.slot == leader.slot and follower.genesis_hash == leader.genesis_hash
    ata = str(get_associated_token_address(payer.pubkey(), USDC_MINT))
    asks: list[tuple[Any, ...]] = [
        ("getSignatureStatuses", sigs),
        ("getBalance", str(payer.pubkey())),
        ("getAccountInfo", ata, {"encoding": "jsonParsed"}),
        ("getAccountInfo", str(SOL_USD_POOL), {"encoding": "base64"}),
        ("getTokenAccountsByOwner", str(payer.pubkey()), {"mint": str(USDC_MINT)}, {"encoding": "jsonParsed"}),
        ("getTokenAccountsByOwner", str(SOL_USD_POOL), {"programId": str(TOKEN_PROGRAM_ID)}, {"encoding": "base64"}),
        ("getSignaturesForAddress", str(payer.pubkey())),
        ("getTokenSupply", str(USDC_MINT)),
        ("getRecentPrioritizationFees", [ata]),
        ("getLatestBlockhash",),
        ("getEpochInfo",),
        ("getTransactionCount",),
    ]
    asks += [
        ("getTransaction", sig, {"encoding": enc, "maxSupportedTransactionVersion": 0})
        for sig in sigs
        for enc in ("json", "jsonParsed", "base64")
    ]
    asks += [("getBlock", slot, {"maxSupportedTransactionVersion": 0}) for slot in follower.blocks]
    for method, *params in asks:
        answer = ask(leader, method, *params)
        assert "result" in answer and ask(follower, method, *params) == answer, method


def test_a_chain_rebuilt_from_the_frames_answers_as_the_leader() -> None:
    authority = Keypair()
    leader = leader_chain(authority)
    log = ReplicationLog(leader)
    payer, sigs = busy_slots(leader, authority)
    follower = follower_chain()
    reader = sync(log, follower)
    assert_same_answers(leader, follower, payer, sigs)

    more = str(leader.airdrop(payer.pubkey(), SOL))  # live events after the backlog
    leader.tick()
    sync(log, follower, reader)
    assert_same_answers(leader, follower, payer, [*sigs, more])


def test_the_log_keeps_its_window_and_folds_the_rest_into_the_base() -> None:
    authority = Keypair()
    leader = leader_chain(authority)
    log = ReplicationLog(leader, window=3)
    payer, sigs = busy_slots(leader, authority)
    for _ in range(10):
        leader.tick()
    assert log.slots == 3 and log.base.slot == leader.slot - 3
    assert log.first_seq > 0 and len(log) == 3  # three slot events, nothing landed in them

    follower = follower_chain()
    sync(log, follower)
    # Accounts and position are the leader's; history starts at the base's block.
    assert follower.slot == leader.slot and follower.first_available_block == log.base.block.slot
    asks: list[tuple[Any, ...]] = [
        ("getBalance", str(payer.pubkey())),
        ("getTokenAccountsByOwner", str(payer.pubkey()), {"mint": str(USDC_MINT)}, {"encoding": "base64"}),
        ("getLatestBlockhash",),
        ("getTransactionCount",),
    ]
    for method, *params in asks:
        assert ask(follower, method, *params) == ask(leader, method, *params), method
    assert ask(follower, "getSignatureStatuses", sigs)["result"]["value"] == [None] * len(sigs)
    assert leader.is_blockhash_valid(follower.latest_blockhash())
    assert all(follower.is_blockhash_valid(leader.blocks[s].blockhash) for s in list(follower.blocks))


def test_a_reader_is_resumed_from_its_place_or_given_a_base() -> None:
    leader = leader_chain(Keypair())
    log = ReplicationLog(leader, window=5)
    leader.tick()
    place = log.next_seq
    leader.tick()

    frames, reader = log.open_reader(leader.genesis_hash, log.log_id, place)
    hello = decode(frames[0])
    assert isinstance(hello, Hello) and not hello.resync and len(frames) == 1
    assert reader is not None and [decode(f).seq for f in log.read(reader)] == [place]  # type: ignore[union-attr]

    for stale in [
        (leader.genesis_hash, "another-log", place),
        (None, log.log_id, log.first_seq - 1),
        (None, None, None),
    ]:
        frames, reader = log.open_reader(*stale)
        assert isinstance(decode(frames[1]), Base) and reader is not None and reader.next_seq == log.first_seq

    frames, reader = log.open_reader(Hash.new_unique(), None, None)  # another cluster: the hello, nothing else
    assert reader is None and len(frames) == 1 and decode(frames[0]).genesis_hash == leader.genesis_hash  # type: ignore[union-attr]


def test_a_reader_that_does_not_read_is_cut_off() -> None:
    leader = leader_chain(Keypair())
    log = ReplicationLog(leader, window=1_000, max_queued=50)
    _, reader = log.open_reader(None, None, None)
    assert reader is not None
    told: list[bool] = []
    reader.on_cut = lambda: told.append(True)
    for _ in range(50):
        leader.tick()
    assert not reader.cut and log.readers == 1
    leader.tick()
    assert reader.cut and told == [True] and log.readers == 0  # nothing is queued for it any more

    _, behind = log.open_reader(None, None, None)  # one the window leaves behind is cut too
    assert behind is not None
    small = ReplicationLog(leader, window=2)
    _, stuck = small.open_reader(None, None, None)
    assert stuck is not None
    for _ in range(3):
        leader.tick()
    assert stuck.cut and "window" in (stuck.cut_reason or "")
    with pytest.raises(Exception, match="window"):
        small.read(stuck)

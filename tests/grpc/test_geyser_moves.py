"""The gRPC server's one upstream subscription (gateway.node.geyser) moves between real nodes of one chain
without a gap: three devnode followers of the session's devnode (tests/node/followers.py), each a process
of its own that the tests kill (SIGKILL) and hang (SIGSTOP), behind a :class:`NodePool` of its own.

Asserted: outcomes, never times. Across a move, the slots' PROCESSED statuses a stream receives are
contiguous (none missing, none twice) and every transaction that landed on the leader meanwhile reaches
it once; with every node dead each stream ends UNAVAILABLE, and a node back serves a new one.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import Counter
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass

import grpc
import pytest
from solana.rpc.async_api import AsyncClient
from solders.keypair import Keypair
from solders.signature import Signature
from solders.system_program import TransferParams, transfer

from devnode.node import Devnode
from gateway.core.node_health import Thresholds
from gateway.core.upstreams import Role
from gateway.grpc.replay import ReplayLog
from gateway.node.geyser import UpstreamGeyser
from gateway.node.geyser_moves import Delivered
from gateway.node.health import HealthSettings
from gateway.node.pool import NodePool, PoolSettings
from gateway.node.streams import PoolStreamNodes
from geyser_proto import geyser_pb2 as pb
from geyser_proto.fanout import SLOT_DEAD, Fanout, Member
from geyser_proto.filters import CONFIRMED, FINALIZED, PROCESSED, compile_request
from tests.chain import airdrop, submit, wait_landed
from tests.node import conftest as node_fixtures
from tests.node.followers import Followers

trio = node_fixtures.trio  # the three followers a, b and c (a session fixture)
all_running = node_fixtures.all_running
restores = pytest.mark.usefixtures("all_running")  # the test leaves a, b and c running

#: The pool's thresholds shortened, as tests/node/test_pool.py does, so a fault plays out in seconds.
FAST = PoolSettings(
    exchange_s=0.1,
    health=HealthSettings(probe_s=0.1, probe_timeout_s=0.5, judge_s=0.05, thresholds=Thresholds(out_at_least_s=1.0)),
)
#: A pool that probes once at its start and then not for a minute: a hung node is found by the
#: subscription's own silence bound, not by the pool.
DEAF = PoolSettings(exchange_s=0.1, health=HealthSettings(probe_s=60.0, probe_timeout_s=0.5, judge_s=0.05))
WITHIN_S = 30.0  # a bound for what comes within a few slots or a node's restart, never a measured time


async def until(condition: Callable[[], bool], what: str, within_s: float = WITHIN_S) -> None:
    deadline = asyncio.get_running_loop().time() + within_s
    while not condition():
        assert asyncio.get_running_loop().time() < deadline, f"never: {what}"
        await asyncio.sleep(0.02)


class Collected:
    """A client stream's sink: every update it is handed, and how it was ended."""

    def __init__(self) -> None:
        self.updates: list[pb.SubscribeUpdate] = []
        self.ended: tuple[grpc.StatusCode, str] | None = None

    def deliver(self, data: bytes) -> None:
        self.updates.append(pb.SubscribeUpdate.FromString(data))

    def end(self, code: grpc.StatusCode, details: str) -> None:
        if self.ended is None:
            self.ended = (code, details)

    def processed(self) -> list[int]:
        """The slots of the PROCESSED statuses received, in the order received."""
        return [u.slot.slot for u in self.updates if u.HasField("slot") and u.slot.status == PROCESSED]

    def signatures(self) -> Counter[str]:
        return Counter(
            str(Signature.from_bytes(u.transaction.transaction.signature))
            for u in self.updates
            if u.HasField("transaction")
        )


def watching(payer: Keypair | None) -> pb.SubscribeRequest:
    """Every slot status, and the transactions of ``payer``."""
    request = pb.SubscribeRequest(slots={"slots": pb.SubscribeRequestFilterSlots()})
    if payer is not None:
        request.transactions["mine"].account_include.append(str(payer.pubkey()))
    return request


@dataclass
class Moving:
    pool: NodePool
    upstream: UpstreamGeyser
    fanout: Fanout

    def client(self, payer: Keypair | None = None) -> tuple[Member, Collected]:
        sink = Collected()
        member = self.fanout.attach(sink, compile_request(watching(payer)))
        self.upstream.refresh()
        return member, sink


@contextlib.asynccontextmanager
async def moving(trio: Followers, settings: PoolSettings = FAST, log: ReplayLog | None = None) -> AsyncIterator[Moving]:
    """An upstream subscription over a pool of a, b and c (a first), as a gRPC server process holds one."""
    pool = NodePool([trio.entry(name) for name in ("a", "b", "c")], settings)
    await pool.start()
    fanout = Fanout()
    upstream = UpstreamGeyser(PoolStreamNodes(pool, Role.GEYSER), fanout, retry_s=0.2, log=log)
    upstream.start()
    try:
        yield Moving(pool, upstream, fanout)
    finally:
        await upstream.stop()
        await pool.close()


class Transfers:
    """Real signed transfers sent to the leader (the session's devnode) one after another until stopped."""

    def __init__(self, devnode: Devnode, payer: Keypair) -> None:
        self.client = AsyncClient(devnode.rpc_url)
        self.payer = payer
        self.sent: list[Signature] = []
        self._stop = asyncio.Event()
        self._task = asyncio.create_task(self._send())

    async def _send(self) -> None:
        while not self._stop.is_set():
            to = Keypair().pubkey()  # a new account each time: rent-exempt
            ix = transfer(TransferParams(from_pubkey=self.payer.pubkey(), to_pubkey=to, lamports=1_000_000))
            self.sent.append(await submit(self.client, self.payer, [ix]))
            await asyncio.sleep(0.03)

    async def stop(self) -> list[str]:
        """Stop sending; each transaction sent, once it landed on the leader (base58)."""
        self._stop.set()
        await self._task
        try:
            for signature in self.sent:
                status = await wait_landed(self.client, signature)
                assert status.err is None, status.err
        finally:
            await self.client.close()
        return [str(signature) for signature in self.sent]


async def funded(devnode: Devnode) -> Keypair:
    payer = Keypair()
    await airdrop(devnode.rpc_url, payer.pubkey())
    return payer


def assert_whole(sink: Collected) -> None:
    """Every slot's PROCESSED status once, in order, from the first received to the last."""
    slots = sink.processed()
    twice = sorted(slot for slot, n in Counter(slots).items() if n > 1)
    assert not twice, f"slots received twice: {twice}"
    missing = sorted(set(range(slots[0], slots[-1] + 1)) - set(slots))
    assert not missing, f"slots missing: {missing}"
    assert slots == sorted(slots)


@restores
async def test_the_stream_moves_off_a_killed_node_without_a_gap(trio: Followers, devnode: Devnode) -> None:
    payer = await funded(devnode)
    log = ReplayLog(300, 2**28, 500_000)  # a process keeping a replay log: the whole feed upstream
    async with moving(trio, log=log) as run:
        _, sink = run.client(payer)
        await until(lambda: run.upstream.node_name == "a" and len(sink.processed()) >= 10, "the stream is on a")
        transfers = Transfers(devnode, payer)
        await until(lambda: len(sink.signatures()) >= 5, "transfers reach the stream")
        trio.kill("a")
        killed_at = sink.processed()[-1]
        await until(lambda: run.upstream.node_name in ("b", "c"), "the stream moved")
        await until(lambda: sink.processed()[-1] >= killed_at + 30, "slots keep coming after the move")
        sent = await transfers.stop()
        await until(lambda: set(sent) <= set(sink.signatures()), "every transfer reached the stream")
        answer = await run.upstream.unary("GetSlot", pb.GetSlotRequest(), pb.GetSlotResponse)  # on the new node
    assert_whole(sink)
    received = sink.signatures()
    assert {signature: received[signature] for signature in sent} == dict.fromkeys(sent, 1)  # each once
    assert answer.slot > killed_at
    assert (run.upstream.moves, run.upstream.gaps) == (1, 0)
    assert run.upstream.resumed >= 1 and run.upstream.delivered.repeats > 0  # the new node's replay, deduplicated
    assert log.resets == 0 and log.newest is not None and log.newest >= killed_at + 30  # the log went on, whole


@restores
async def test_a_hung_node_is_left_after_the_silence_bound_without_a_gap(trio: Followers, devnode: Devnode) -> None:
    payer = await funded(devnode)
    async with moving(trio, DEAF) as run:  # no log: the streams' union upstream
        _, sink = run.client(payer)
        await until(lambda: run.upstream.node_name == "a" and len(sink.processed()) >= 10, "the stream is on a")
        transfers = Transfers(devnode, payer)
        await until(lambda: len(sink.signatures()) >= 5, "transfers reach the stream")
        trio.hang("a")  # its socket stays open: only the silence says it is gone
        hung_at = sink.processed()[-1]
        await until(lambda: run.upstream.node_name in ("b", "c"), "the stream moved")
        await until(lambda: sink.processed()[-1] >= hung_at + 30, "slots keep coming after the move")
        sent = await transfers.stop()
        await until(lambda: set(sent) <= set(sink.signatures()), "every transfer reached the stream")
        in_service = [view.in_service for view in run.pool.view.nodes]
    assert_whole(sink)
    received = sink.signatures()
    assert {signature: received[signature] for signature in sent} == dict.fromkeys(sent, 1)
    assert in_service == [True, True, True]  # the pool never judged a: the subscription found it hung itself
    assert (run.upstream.silences, run.upstream.moves, run.upstream.gaps) == (1, 1, 0)


@restores
async def test_with_every_node_dead_the_streams_end_unavailable_then_a_node_back_serves(trio: Followers) -> None:
    log = ReplayLog(300, 2**28, 500_000)
    async with moving(trio, log=log) as run:
        member, sink = run.client()
        await until(lambda: len(sink.processed()) >= 10, "the stream is served")
        for name in ("a", "b", "c"):
            trio.kill(name)
        await until(lambda: sink.ended is not None, "the stream ended")
        _, late = run.client()  # a stream opened while no node serves geyser ends at once too
        await until(lambda: late.ended is not None, "the late stream ended")
        await trio.start("b")
        await until(lambda: run.pool.serves(Role.GEYSER), "b is back in service")
        _, again = run.client()
        await until(lambda: len(again.processed()) >= 10, "a new stream is served by b")
        node = run.upstream.node_name
    for ended in (sink.ended, late.ended):
        assert ended is not None
        code, details = ended
        assert code == grpc.StatusCode.UNAVAILABLE
        assert details.startswith("no upstream node is in service for geyser") and "from_slot" in details
    assert not member.alive and again.ended is None and node == "b"
    assert run.upstream.gaps == 1 and log.resets == 1  # b restarted holds nothing from before: a real gap


def status(slot: int, level: int) -> pb.SubscribeUpdate:
    return pb.SubscribeUpdate(slot=pb.SubscribeUpdateSlot(slot=slot, status=level))  # type: ignore[arg-type]


def account(slot: int, write_version: int, signature: bytes) -> pb.SubscribeUpdate:
    info = pb.SubscribeUpdateAccountInfo(pubkey=b"k" * 32, write_version=write_version, txn_signature=signature)
    return pb.SubscribeUpdate(account=pb.SubscribeUpdateAccount(account=info, slot=slot))


def delivered(updates: list[pb.SubscribeUpdate], window: int = 96) -> tuple[Delivered, list[bool]]:
    seen = Delivered(window)
    return seen, [seen.first(u, u.WhichOneof("update_oneof")) for u in updates]


def test_an_update_another_node_sends_again_is_known_by_what_every_node_gives_it() -> None:
    """An account update is known by pubkey, slot and the writing transaction, not by the node's write_version."""
    seen, fresh = delivered(
        [account(10, 1, b"s" * 64), account(10, 999, b"s" * 64), account(10, 2, b"t" * 64), account(11, 3, b"s" * 64)]
    )
    assert fresh == [True, False, True, True] and seen.repeats == 1
    _, fresh = delivered([status(10, PROCESSED), status(10, CONFIRMED), status(10, PROCESSED)])
    assert fresh == [True, True, False]


def test_a_move_resumes_from_the_oldest_slot_that_may_still_get_an_update() -> None:
    """As the devnode sends them: slot s processed, s-1 confirmed, s-2 finalized: from the slot after the
    newest finalized one; a slot never finalized (a dead fork's, not said dead) holds it back, to a bound."""
    feed = []
    for slot in range(100, 110):
        feed += [status(slot - 1, CONFIRMED), status(slot - 2, FINALIZED), status(slot, PROCESSED)]
    seen, _ = delivered(feed)
    assert (seen.newest, seen.finalized, seen.resume_slot(64)) == (109, 107, 108)
    seen, _ = delivered([status(95, PROCESSED), *feed])  # 95 was never finalized
    assert seen.resume_slot(64) == 95
    assert seen.resume_slot(10) == 108  # further back than the bound: given up
    seen, _ = delivered([status(95, PROCESSED), status(95, SLOT_DEAD), *feed])  # dead: nothing more comes
    assert seen.resume_slot(64) == 108
    seen, _ = delivered([status(slot, PROCESSED) for slot in range(100, 110)])  # nothing finalized yet
    assert seen.resume_slot(64) == 109 - 64
    assert delivered([])[0].resume_slot() is None

"""The pool of nodes (gateway/node/pool.py, gateway/node/health.py) against real node processes: devnode
followers of the session's devnode, each faulted as a real node fails (kill -9, SIGSTOP, lag, another cluster).

Asserted: outcomes (which node answered, that no read failed while another node served, that a send
landed once), never times. The pool's own thresholds are shortened (probes every 0.1 s, 1 s out at
least) so that each fault plays out within a few seconds.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import Counter
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import aiohttp
import orjson
import pytest
from solders.keypair import Keypair

from devnode.node import Devnode
from gateway.core.node_health import Thresholds
from gateway.core.slots import SIZE, needs, request_terms
from gateway.core.upstreams import Role, Tier, UpstreamNode
from gateway.node.health import HealthSettings, cluster_of
from gateway.node.pool import NodePool, NoNode, PoolSettings
from tests.chain import airdrop, signed_transfer
from tests.devnode.helpers import start_node
from tests.node.followers import Followers
from tests.recorded_metrics import Recorded, recording

SETTINGS = PoolSettings(
    exchange_s=0.1,
    hedge_min_s=0.01,
    extra_calls_per_s=50,
    health=HealthSettings(probe_s=0.1, probe_timeout_s=0.5, judge_s=0.05, thresholds=Thresholds(out_at_least_s=1.0)),
)
pytestmark = pytest.mark.usefixtures("all_running")  # each test leaves a, b and c running

BROADCASTS = "gateway_upstream_broadcast_sends_total"
GET_SLOT = b'{"jsonrpc":"2.0","id":1,"method":"getSlot","params":[{"commitment":"processed"}]}'


@contextlib.asynccontextmanager
async def pool_of(trio: Followers, *names: str, settings: PoolSettings = SETTINGS) -> AsyncIterator[NodePool]:
    pool = NodePool([trio.entry(n) for n in names], settings)
    await pool.start()
    try:
        yield pool
    finally:
        await pool.close()


async def until(condition: Callable[[], bool], within_s: float = 10.0) -> None:
    deadline = asyncio.get_running_loop().time() + within_s
    while not condition():
        assert asyncio.get_running_loop().time() < deadline, "condition not reached in time"
        await asyncio.sleep(0.02)


class Readers:
    """Callers reading the slot without a pause, as a loaded gateway's replicas do: each answer's node,
    each failure."""

    def __init__(self, pool: NodePool, callers: int = 6) -> None:
        self.pool = pool
        self.answered: list[str] = []
        self.failed: list[BaseException] = []
        self._stop = asyncio.Event()
        self._tasks = [asyncio.create_task(self._read()) for _ in range(callers)]

    async def _read(self) -> None:
        while not self._stop.is_set():
            try:
                answer = await self.pool.read(GET_SLOT, 5.0, key="getSlot", parse=True)
            except Exception as exc:
                self.failed.append(exc)
            else:
                assert isinstance(answer.json()["result"], int)
                self.answered.append(str(answer.node))

    def count(self, node: str, since: int = 0) -> int:
        return sum(1 for n in self.answered[since:] if n == node)

    async def stop(self) -> None:
        self._stop.set()
        await asyncio.gather(*self._tasks)


async def test_reads_go_to_the_first_node_and_every_read_of_a_killed_one_to_the_next(trio: Followers) -> None:
    async with pool_of(trio, "a", "b", "c") as pool:
        readers = Readers(pool)
        await until(lambda: readers.count("a") >= 40)
        assert set(readers.answered) == {"a"}  # a sticky primary: every caller asks the same node
        trio.kill("a")
        at_kill = len(readers.answered)
        await until(lambda: readers.count("b", at_kill) >= 40)
        await until(lambda: not pool.view.nodes[0].in_service)  # the owner has heard of it too
        await readers.stop()
    assert readers.failed == []  # the reads in flight at the kill were answered by another node
    after = Counter(readers.answered[at_kill:])  # (answers a wrote before it died may still come in)
    assert after["b"] > after["c"]  # in the pool's order: b, then c for a hedge
    assert "a" not in readers.answered[-40:]
    assert pool.view.nodes[0].reason.startswith(("not answering", "its last"))


async def test_a_hung_node_costs_a_hedge_not_a_timeout_and_comes_back_after_the_breaker(trio: Followers) -> None:
    with recording() as recorded:
        async with pool_of(trio, "a", "b") as pool:
            readers = Readers(pool)
            await until(lambda: readers.count("a") >= 40)
            trio.hang("a")
            at_hang = len(readers.answered)
            await until(lambda: not pool.view.nodes[0].in_service)
            await until(lambda: readers.count("b", at_hang) >= 40)
            trio.resume("a")
            at_resume = len(readers.answered)
            await until(lambda: readers.count("a", at_resume) >= 20)  # back, and first again
            await readers.stop()
    assert readers.failed == []  # no read waited its timeout while b served
    assert recorded.counts[("gateway_upstream_hedges_total", ("b", "won"))] >= 1
    hedges = sum(n for (name, _), n in recorded.counts.items() if name == "gateway_upstream_hedges_total")
    assert hedges <= 5 * SETTINGS.extra_calls_per_s + 50 * 30  # within the budget of extra calls (and refill)


async def test_a_node_far_behind_never_answers(trio: Followers, devnode: Devnode) -> None:
    log = devnode.replication
    assert log is not None
    await until(lambda: log.slots >= 210, within_s=30.0)  # a follower 200 behind needs 200 slots of the log
    await trio.start("slow", lag_slots=200)
    try:
        async with pool_of(trio, "slow", "b") as pool:
            await until(lambda: pool.view.version > 2 and pool.ready)
            slow = pool.view.nodes[0]
            assert not slow.in_service and slow.reason.startswith(("behind by", "unhealthy: Node is behind"))
            assert slow.lag is not None and slow.lag >= 190
            answers = Counter([(await pool.read(GET_SLOT, 5.0, key="getSlot")).node for _ in range(30)])
        assert answers == Counter({"b": 30})
    finally:
        trio.kill("slow")


async def test_with_every_node_killed_nothing_is_tried_then_one_restarted_serves(trio: Followers) -> None:
    async with pool_of(trio, "a", "b", "c") as pool:
        await until(lambda: pool.ready)
        for name in ("a", "b", "c"):
            trio.kill(name)
        await until(lambda: not pool.ready)
        with pytest.raises(NoNode, match="no upstream node is in service for reads"):
            await pool.read(GET_SLOT, 5.0)
        await trio.start("b")
        await until(lambda: pool.ready)
        assert (await pool.read(GET_SLOT, 5.0)).node == "b"


async def test_a_node_of_another_cluster_is_named_and_never_serves(
    trio: Followers, devnode: Devnode, tmp_path: Path
) -> None:
    other = await start_node(tmp_path / "other-chain")  # a devnode of its own: another genesis
    try:
        pool_nodes = [trio.entry("a"), trio.entry("b")]
        foreign = UpstreamNode(name="elsewhere", rpc_url=other.rpc_url, tier=Tier.PRIMARY)
        found = await cluster_of([*pool_nodes, foreign], SETTINGS.health)
        assert list(found) == ["elsewhere"] and found["elsewhere"].startswith("node elsewhere serves another cluster")
        pool = NodePool([foreign, *pool_nodes], SETTINGS)
        await pool.start()
        try:
            await until(lambda: pool.ready)
            assert pool.view.nodes[0].reason.startswith("another cluster")
            assert {(await pool.read(GET_SLOT, 5.0)).node for _ in range(10)} == {"a"}
        finally:
            await pool.close()
    finally:
        await other.stop()


async def funded(devnode: Devnode) -> Keypair:
    payer = Keypair()
    await airdrop(devnode.rpc_url, payer.pubkey(), 1_000_000_000)
    return payer


def send_body(tx: str, skip_preflight: bool) -> bytes:
    config = {"encoding": "base64", "skipPreflight": skip_preflight}
    return orjson.dumps({"jsonrpc": "2.0", "id": 7, "method": "sendTransaction", "params": [tx, config]})


def broadcasts(recorded: Recorded, outcome: str) -> Counter[str]:
    """Sends per node with ``outcome``, as ``gateway_upstream_broadcast_sends_total`` counted them."""
    counts = recorded.counts.items()
    return Counter({labels[0]: n for (name, labels), n in counts if name == BROADCASTS and labels[1] == outcome})


async def test_a_send_goes_to_every_node_once_checked_and_lands_once(trio: Followers, devnode: Devnode) -> None:
    payer = await funded(devnode)
    with recording() as recorded:
        async with pool_of(trio, "a", "b", "c") as pool:
            await until(lambda: pool.serves(Role.SENDS))
            tx = await signed_transfer(devnode.rpc_url, payer, Keypair().pubkey(), 1_000_000)
            answer = await pool.send(send_body(tx, skip_preflight=False), 10.0)
            signature = answer.json()["result"]
            await until(lambda: pool.sends.on_their_way == 0)  # the unchecked sends to b and c, after a accepted
            again = await pool.send(send_body(tx, skip_preflight=True), 10.0)  # already processed counts as accepted
            await until(lambda: pool.sends.on_their_way == 0)  # the two nodes that did not answer first
            poor = Keypair()  # no lamports: every preflight refuses it, and it is sent nowhere else
            refused = await pool.send(
                send_body(await signed_transfer(devnode.rpc_url, poor, payer.pubkey(), 5), False), 10.0
            )
    assert answer.node == "a" and isinstance(signature, str)
    assert again.json()["result"] == signature
    assert refused.node == "a" and refused.json()["error"]["code"] == -32002
    accepted = broadcasts(recorded, "accepted")
    every = {o: broadcasts(recorded, o) for o in ("accepted", "refused", "failed")}
    assert accepted == Counter({"a": 2, "b": 2, "c": 2}), every  # the first send everywhere, the second everywhere
    assert broadcasts(recorded, "refused") == Counter({"a": 1})
    history = await _rpc(devnode.rpc_url, "getSignaturesForAddress", str(payer.pubkey()))
    assert [entry["signature"] for entry in history["result"]].count(signature) == 1


async def test_a_send_with_the_first_node_dead_is_accepted_by_another(trio: Followers, devnode: Devnode) -> None:
    payer = await funded(devnode)
    async with pool_of(trio, "a", "b") as pool:
        await until(lambda: pool.serves(Role.SENDS))
        trio.kill("a")  # before the pool's owner sees it: the send meets a refused connection
        tx = await signed_transfer(devnode.rpc_url, payer, Keypair().pubkey(), 1_000_000)
        answer = await pool.send(send_body(tx, skip_preflight=False), 10.0)
    assert answer.node == "b" and isinstance(answer.json()["result"], str)


async def _rpc(url: str, method: str, *params: object) -> dict[str, Any]:
    body = {"jsonrpc": "2.0", "id": 1, "method": method, "params": list(params)}
    async with aiohttp.ClientSession() as http, http.post(url, json=body) as resp:
        doc: dict[str, Any] = await resp.json()
        return doc


async def test_a_min_context_slot_no_node_has_reached_is_the_first_nodes_to_refuse(trio: Followers) -> None:
    """A caller naming a slot of the future holds nothing and spends no retry: the first node answers -32016,
    as a single node would, and no other node is asked."""
    params = [{"commitment": "processed", "minContextSlot": 10**12}]
    body = orjson.dumps({"jsonrpc": "2.0", "id": 1, "method": "getSlot", "params": params})
    async with pool_of(trio, "a", "b") as pool:
        await until(lambda: pool.ready and pool.best_position(Role.READS)[0] > 0)
        need = needs([0] * SIZE, [request_terms(params)], pool.best_position(Role.READS))
        with recording() as recorded:
            answer = await pool.read(body, 5.0, key="getSlot", need=need, parse=True)
    assert answer.node == "a" and answer.json()["error"]["code"] == -32016
    extra = [name for (name, _), n in recorded.counts.items() if n and name.endswith(("retries_total", "hedges_total"))]
    assert extra == []
    assert [
        labels[0]
        for (name, labels), n in recorded.counts.items()
        if name == "gateway_upstream_request_duration_seconds"
    ] == ["a"]

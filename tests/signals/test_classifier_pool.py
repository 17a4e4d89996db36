"""The classifier over a pool of nodes while they fail: three devnode followers (real processes) of the feed
devnode, the last one three slots behind, the first killed (kill -9), then the next hung (SIGSTOP), while the
classifier runs. Every event of
every slot it passed is in the log exactly once, as the leader's own blocks classify — nothing lost in the
moves, nothing twice — and the classifier went on past both faults. Times are never asserted."""

from __future__ import annotations

import asyncio
import contextlib
from pathlib import Path

import redis.asyncio as aioredis

from gateway.core.upstreams import UpstreamNode
from gateway.node.http import HttpUpstream
from gateway.node.pool import NodePool
from gateway.signals.classifier import SignalClassifier
from gateway.signals.rules import SignalRules, classify_block
from gateway.signals.store import SignalLog
from tests.node.followers import followers
from tests.node.test_pool import SETTINGS
from tests.node.test_upstream_failures import Relay
from tests.signals.conftest import Recorded

RULES = SignalRules(large_swap_lamports=10**8)


async def test_the_classifier_follows_the_pool_through_a_kill_and_a_hang_with_every_event_once(
    recorded_chain: Recorded, redis_client: aioredis.Redis, prefix: str, tmp_path: Path
) -> None:
    leader = recorded_chain.node
    signal_log = SignalLog(redis_client, prefix=prefix)
    async with asyncio.timeout(240), followers(leader.url, tmp_path) as nodes:  # a failure, never a hang
        await nodes.start_all(["a", "b"])
        await nodes.start("c", lag_slots=3)  # in service (within the lag allowed), a few slots behind
        pool = NodePool([nodes.entry(n) for n in ("a", "b", "c")], SETTINGS)
        classifier = SignalClassifier(signal_log, pool, RULES, max_slots_per_poll=3)
        running = asyncio.create_task(classifier.run(0.05))

        async def past(slots: int) -> None:
            start = classifier.stats.slots_processed
            deadline = asyncio.get_running_loop().time() + 60
            while classifier.stats.slots_processed < start + slots:
                assert asyncio.get_running_loop().time() < deadline, f"the classifier stalled: {classifier.stats}"
                await asyncio.sleep(0.05)

        try:
            await past(5)
            nodes.kill("a")
            await past(15)
            nodes.hang("b")
            await past(15)
            nodes.resume("b")
        finally:
            nodes.resume("b")  # a stopped process would not stop with the others
            running.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await running
            await pool.close()
    first, end = classifier.stats.first_slot, await signal_log.cursor()
    assert first is not None and end is not None

    blocks = await leader.blocks(first, end)
    expected = [e.to_json() for slot, block in sorted(blocks.items()) for e in classify_block(block, slot, RULES)]
    stored = [s.event for s in await signal_log.read_after("0-0", count=1_000_000)]
    assert stored == expected
    assert len(expected) > 10


async def test_a_poll_reads_one_nodes_view_so_a_node_behind_never_settles_slots_it_has_not_reached(
    recorded_chain: Recorded, redis_client: aioredis.Redis, prefix: str, tmp_path: Path
) -> None:
    """The node first for reads (the leader, behind a relay) fails ``getBlocks`` while the classifier is a few
    slots behind it; the pool's other node is ten slots behind. Had the poll's ``getBlocks`` gone to that node
    after the first node's tip, the slots between its head and the poll's end would have been settled empty."""
    leader = recorded_chain.node
    signal_log = SignalLog(redis_client, prefix=prefix)
    alone = HttpUpstream(leader.url, connections=2)
    first = SignalClassifier(signal_log, alone, RULES)
    try:
        while await signal_log.cursor() is None:  # the cursor: the leader's tip now
            await first.run_once()
    finally:
        await alone.close()
    start = await signal_log.cursor()
    assert start is not None
    relay = Relay(leader.url)
    await relay.start()
    async with followers(leader.url, tmp_path) as nodes:
        await nodes.start("behind", lag_slots=10)
        relay.cut_methods = {"getBlocks"}
        pool = NodePool(
            [UpstreamNode(name="first", rpc_url=f"http://127.0.0.1:{relay.port}/"), nodes.entry("behind")], SETTINGS
        )
        try:
            while int(await leader.call("getSlot", [{"commitment": "confirmed"}])) < start + 6:  # noqa: ASYNC110
                await asyncio.sleep(0.05)  # the chain moves on: the classifier is then a few slots behind
            classifier = SignalClassifier(signal_log, pool, RULES, max_slots_per_poll=3)
            for _ in range(5):  # polls while the first node fails getBlocks (then is asked last): none settles a slot
                with contextlib.suppress(Exception):
                    await classifier.run_once()
            assert relay.calls["getBlocks"] >= 1
            relay.cut_methods = set()
            target = int(await leader.call("getSlot", [{"commitment": "confirmed"}]))
            deadline = asyncio.get_running_loop().time() + 60
            while (await signal_log.cursor() or 0) < target:
                assert asyncio.get_running_loop().time() < deadline, f"the classifier stalled: {classifier.stats}"
                await classifier.run_once()
        finally:
            await pool.close()
            await relay.stop()
    end = await signal_log.cursor()
    assert end is not None
    blocks = await leader.blocks(start + 1, end)
    expected = [e.to_json() for slot, block in sorted(blocks.items()) for e in classify_block(block, slot, RULES)]
    stored = [s.event for s in await signal_log.read_after("0-0", count=1_000_000)]
    assert [e for e in stored if e["slot"] > start] == expected
    assert len(expected) > 3

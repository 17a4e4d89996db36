"""The classifier (gateway.signals.classifier) against the feed devnode and the embedded Redis: it
resumes from its cursor after a crash with every event of every slot written once, and a node that
fails stops it without skipping anything."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable
from pathlib import Path

import pytest
import redis.asyncio as aioredis

from gateway.app.settings import Settings
from gateway.node.http import HttpUpstream, UpstreamUnavailable
from gateway.signals.classifier import SignalClassifier
from gateway.signals.classifier_actor import SignalClassifierActor
from gateway.signals.rules import SignalRules, classify_block
from gateway.signals.store import SignalLog
from tests.node.test_upstream_failures import Relay
from tests.signals.conftest import Recorded, clear_default_log

#: Rules that make many events of a little traffic: every trade over 0.1 SOL is a largeSwap.
RULES = SignalRules(large_swap_lamports=10**8)


async def until(condition: Callable[[], Awaitable[bool]], what: str, timeout_s: float = 30.0) -> None:
    deadline = asyncio.get_running_loop().time() + timeout_s
    while not await condition():
        assert asyncio.get_running_loop().time() < deadline, f"gave up waiting: {what}"
        await asyncio.sleep(0.05)


async def test_a_restarted_classifier_resumes_without_loss_or_duplicate(
    recorded_chain: Recorded, redis_client: aioredis.Redis, prefix: str
) -> None:
    node = recorded_chain.node
    signal_log = SignalLog(redis_client, prefix=prefix)
    upstream = HttpUpstream(node.url, connections=4)
    try:
        tip_before = await node.call("getSlot", [{"commitment": "confirmed"}])
        first = SignalClassifier(signal_log, upstream, RULES, max_slots_per_poll=3)
        running = asyncio.create_task(first.run(0.05))

        async def classified_some() -> bool:
            return first.stats.slots_processed >= 8

        await until(classified_some, "the first classifier to classify 8 blocks")
        running.cancel()  # a crash, wherever it lands: a slot's append included
        with contextlib.suppress(asyncio.CancelledError):
            await running
        assert first.stats.first_slot is not None and first.stats.first_slot >= tip_before  # from the tip on
        stopped_at = await signal_log.cursor()
        assert stopped_at is not None

        async def chain_moved_on() -> bool:
            return int(await node.call("getSlot", [{"commitment": "confirmed"}])) > stopped_at + 10

        await until(chain_moved_on, "10 more slots while no classifier runs")
        second = SignalClassifier(signal_log, upstream, RULES, max_slots_per_poll=3)  # catches up 3 slots a poll
        target = int(await node.call("getSlot", [{"commitment": "confirmed"}])) - 1

        async def caught_up() -> bool:
            await second.run_once()
            return (await signal_log.cursor() or 0) >= target

        await until(caught_up, "the second classifier to catch up")
        assert second.stats.first_slot is not None and second.stats.first_slot > stopped_at
        end = await signal_log.cursor()
        assert end is not None
    finally:
        await upstream.close()

    blocks = await node.blocks(first.stats.first_slot, end)
    expected = [e.to_json() for slot, block in sorted(blocks.items()) for e in classify_block(block, slot, RULES)]
    stored = await signal_log.read_after("0-0", count=1_000_000)
    assert [s.event for s in stored] == expected
    assert len(expected) > 8
    per_slot: dict[int, int] = {}
    for s in stored:  # ids are <slot>-<n>, n counting the slot's events from 0
        n = per_slot.get(s.event["slot"], 0)
        assert s.id == f"{s.event['slot']}-{n}"
        per_slot[s.event["slot"]] = n + 1


async def test_a_failing_node_stops_the_classifier_without_skipping(
    recorded_chain: Recorded, redis_client: aioredis.Redis, prefix: str
) -> None:
    relay = Relay(recorded_chain.node.url)
    await relay.start()
    signal_log = SignalLog(redis_client, prefix=prefix)
    upstream = HttpUpstream(f"http://127.0.0.1:{relay.port}/", connections=4)
    classifier = SignalClassifier(signal_log, upstream, RULES)
    try:

        async def started() -> bool:
            await classifier.run_once()
            return await signal_log.cursor() is not None

        await until(started, "a first slot appended")
        relay.cut = True
        before = await signal_log.cursor()
        with pytest.raises(UpstreamUnavailable):
            await classifier.run_once()
        stop = asyncio.Event()
        running = asyncio.create_task(classifier.run(0.05, stop))  # keeps failing, with backoff

        async def failing() -> bool:
            return classifier.stats.last_error is not None and relay.seen > 3

        await until(failing, "polls that fail")
        assert await signal_log.cursor() == before
        relay.cut = False

        async def moving_again() -> bool:
            return (await signal_log.cursor() or 0) > (before or 0) + 3

        await until(moving_again, "the classifier to move on once the node answers")
        stop.set()
        await running
    finally:
        await upstream.close()
        await relay.stop()
    end = await signal_log.cursor()
    assert end is not None and before is not None
    blocks = await recorded_chain.node.blocks(before + 1, end)
    expected = [e.to_json() for slot, block in sorted(blocks.items()) for e in classify_block(block, slot, RULES)]
    assert [s.event for s in await signal_log.read_after(f"{before}-18446744073709551615", count=100_000)] == expected


async def test_the_actor_runs_the_classifier_from_settings(
    recorded_chain: Recorded, redis_url: str, redis_client: aioredis.Redis, tmp_path: Path
) -> None:
    """The plain class Ray wraps: its loop thread classifies into the default log with the settings' rules."""
    await clear_default_log(redis_client)
    settings = Settings(
        home=tmp_path, redis_url=redis_url, upstream_rpc_url=recorded_chain.node.url, signal_large_swap_lamports=10**8
    )
    actor = SignalClassifierActor(settings.model_dump(mode="json"))
    try:
        deadline = asyncio.get_running_loop().time() + 30
        while actor.status().get("slots_processed", 0) < 3:
            assert actor.status()["running"], actor.status()
            assert asyncio.get_running_loop().time() < deadline, actor.status()
            await asyncio.sleep(0.05)
        assert actor.classifier is not None and actor.classifier.rules == RULES
    finally:
        # off the loop: the node the poll may be waiting on is served by this loop, so a shutdown that blocked it
        # waited for the poll's own timeout (a CI run under load saw the thread still running after 10 s)
        await asyncio.to_thread(actor.shutdown)
    try:
        assert actor.status()["running"] is False
        # Stopped, so neither moves: read while it ran, the log's cursor and the actor's could be a slot apart.
        assert await SignalLog(redis_client).cursor() == actor.status()["cursor"]
    finally:
        await clear_default_log(redis_client)

"""What counts against a node, and who pays for the pool's extra calls (issue 83), against real node
processes: devnode followers of the session's devnode (tests/node/followers.py).

Only what a node says of itself counts against it: an error whose message repeats the caller's text is the
caller's answer, asked of one node; a heavy read's timeout and the races its hedges win say nothing of the
node; the gateway's own answer budget full says nothing of it. The budget of retries and hedges counts a
batch's items, and a caller gets no more than an even share of a node's while others want some.

Asserted: which nodes were asked (``gateway_upstream_request_duration_seconds`` by node, recorded in
memory), what each call was answered, whether a node left service or was made suspect; never times. A
hung node (SIGSTOP) makes a hedge sure to win; its probes wait 5 s here, so the owner keeps it in service
while a test's calls run.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import time
from collections.abc import AsyncIterator
from typing import Any

import orjson
import pytest

from gateway.core.node_health import Thresholds
from gateway.core.upstreams import Role, Tier
from gateway.node.health import HealthSettings
from gateway.node.http import UpstreamTimeout, UpstreamUnavailable
from gateway.node.members import Answer
from gateway.node.pool import NodePool, PoolSettings
from tests.node.followers import Followers
from tests.node.test_pool import SETTINGS, pool_of, until
from tests.recorded_metrics import Recorded, recording

pytestmark = pytest.mark.usefixtures("all_running")  # each test leaves a, b and c running

#: A hung node stays in service while a test's calls run (probes wait 5 s); a hedge goes after 50 ms; a
#: node's budget of extra calls is 10 (2 a second, five seconds' worth).
PATIENT = PoolSettings(
    exchange_s=0.1,
    hedge_min_s=0.01,
    hedge_unknown_s=0.05,
    extra_calls_per_s=2,
    health=HealthSettings(probe_s=0.1, probe_timeout_s=5.0, judge_s=0.05, thresholds=Thresholds(out_at_least_s=1.0)),
)
SECONDS = "gateway_upstream_request_duration_seconds"
SYSTEM = "11111111111111111111111111111111"


def call(i: int, method: str, *params: Any) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": i, "method": method, "params": list(params)}


def slots(n: int) -> bytes:
    """A batch of ``n`` getSlot calls."""
    return orjson.dumps([call(i, "getSlot", {"commitment": "processed"}) for i in range(n)])


GET_SLOT = orjson.dumps(call(1, "getSlot", {"commitment": "processed"}))
#: An encoding no node knows: the node's -32602 repeats its name, as Agave's does (devnode/encoding.py).
BEHIND = orjson.dumps(call(1, "getAccountInfo", SYSTEM, {"encoding": "node is behind"}))
#: A batch of 21 holding one such call.
BEHIND_BATCH = orjson.dumps(
    [call(0, "getAccountInfo", SYSTEM, {"encoding": "node is unhealthy"})]
    + [call(i, "getSlot", {"commitment": "processed"}) for i in range(1, 21)]
)


def asked(recorded: Recorded) -> set[str]:
    """The nodes a request was sent to, whatever its outcome."""
    return {labels[0] for (name, labels) in recorded.counts if name == SECONDS}


def extra_calls(recorded: Recorded) -> list[tuple[str, tuple[str, ...]]]:
    return [key for key in recorded.counts if key[0].endswith(("retries_total", "hedges_total"))]


@contextlib.asynccontextmanager
async def leaving(pool: NodePool) -> AsyncIterator[list[tuple[str, str]]]:
    """Every node out of service (name, reason) in each view the pool applied while the block ran; at its
    end, three views more, so that the owner has judged what the block's calls did."""
    out: list[tuple[str, str]] = []

    async def watch() -> None:
        while True:
            await pool.changed()
            out.extend((v.name, v.reason) for v in pool.view.nodes if not v.in_service)

    task = asyncio.create_task(watch())
    try:
        yield out
        for _ in range(3):
            await asyncio.wait_for(pool.changed(), 10.0)
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


def serving(pool: NodePool, count: int) -> bool:
    return sum(1 for v in pool.view.nodes if v.in_service) == count


def error_of(answer: Answer) -> dict[str, Any]:
    doc = answer.json()
    error = (doc[0] if isinstance(doc, list) else doc)["error"]
    assert isinstance(error, dict)
    return error


async def test_an_error_repeating_the_callers_text_is_asked_of_one_node_and_counts_nothing(trio: Followers) -> None:
    answers: list[Answer] = []
    async with pool_of(trio, "a", "b", "c") as pool:
        await until(lambda: serving(pool, 3))
        with recording() as recorded:
            async with leaving(pool) as out:
                for i in range(60):  # more than enough to take a node out were they its failures
                    body = BEHIND_BATCH if i % 3 == 0 else BEHIND
                    key = "batch" if i % 3 == 0 else "getAccountInfo"
                    answers.append(await pool.read(body, 5.0, key=key, parse=True, caller="tenant"))
    assert {a.node for a in answers} == {"a"}
    assert all(not a.retryable for a in answers)
    errors = [error_of(a) for a in answers]
    assert {e["code"] for e in errors} == {-32602}
    assert all("node is behind" in e["message"] or "node is unhealthy" in e["message"] for e in errors), errors[:2]
    batch = answers[0].json()
    assert [isinstance(item.get("result"), int) for item in batch[1:]] == [True] * 20
    assert asked(recorded) == {"a"}  # one node call each: no retry, no hedge
    assert extra_calls(recorded) == []
    assert out == []


async def test_a_heavy_reads_timeout_is_its_own_and_counts_nothing_against_the_node(trio: Followers) -> None:
    """A heavy read whose deadline no node can meet (as a caller's heavy call outlasting its timeout): a
    times out each, and is neither made suspect nor taken out of service. b is a fallback, so each read goes
    to a alone, once (the path of one node, or of one primary for a role)."""
    nodes = [trio.entry("a"), trio.entry("b", Tier.FALLBACK)]
    heavy = orjson.dumps(call(1, "getBlocks", 0))
    pool = NodePool(nodes, SETTINGS)
    await pool.start()
    try:
        await until(lambda: serving(pool, 2))
        with recording() as recorded:
            async with leaving(pool) as out:
                for _ in range(100):  # a's failures, were they counted, would be most of its calls
                    with pytest.raises(UpstreamTimeout):
                        await pool.read(heavy, 1e-6, Role.HEAVY, key="getBlocks", parse=True, caller="tenant")
                assert pool.nodes["a"].suspect_until <= time.monotonic()
        answer = await pool.read(heavy, 5.0, Role.HEAVY, key="getBlocks", parse=True, caller="tenant")
        first_reads = (await pool.read(GET_SLOT, 5.0, key="getSlot", parse=True)).node
    finally:
        await pool.close()
    assert asked(recorded) == {"a"}
    assert out == []
    assert answer.node == "a" and isinstance(answer.json()["result"], list)
    assert first_reads == "a"


async def test_a_race_a_heavy_reads_hedge_wins_makes_no_node_suspect(trio: Followers) -> None:
    """With a hung, every heavy read's hedge to b wins: a heavy read may be slow on any node, so the races
    say nothing of a (the probes judge a hung node). A light read's races still do (test_pool's hung node)."""
    heavy = orjson.dumps(call(1, "getBlocks", 0))
    async with pool_of(trio, "a", "b", settings=PATIENT) as pool:
        await until(lambda: serving(pool, 2))
        trio.hang("a")
        answers = [
            await pool.read(heavy, 5.0, Role.HEAVY, key="getBlocks", parse=True, caller="tenant") for _ in range(4)
        ]
        assert pool.nodes["a"].suspect_until <= time.monotonic()  # before the fix: asked last after 3 in a row
        assert pool.view.nodes[0].in_service  # the owner has not judged a yet: still first
    assert [a.node for a in answers] == ["b"] * 4


async def test_a_batch_costs_a_token_per_call_it_holds(trio: Followers) -> None:
    """b's budget is 10 extra calls: a batch of 21 is never hedged to it, a batch of 4 is."""
    async with pool_of(trio, "a", "b", settings=PATIENT) as pool:
        await until(lambda: serving(pool, 2))
        trio.hang("a")
        with pytest.raises(UpstreamTimeout):
            await pool.read(slots(21), 1.0, key="batch", parse=True, caller="tenant")
        answer = await pool.read(slots(4), 5.0, key="batch", parse=True, caller="tenant")
    assert answer.node == "b" and len(answer.json()) == 4


async def test_no_caller_takes_more_than_an_even_share_of_a_nodes_extra_calls(trio: Followers) -> None:
    """x takes 6 of b's 10 tokens alone; once y wants some too, each may hold 5: y's hedges go, x's no
    longer. The reads are heavy so that the races b wins keep a first (a stays asked first, its calls hedged)."""

    async def read(caller: str, timeout_s: float = 5.0) -> Answer:
        return await pool.read(GET_SLOT, timeout_s, key="getSlot", parse=True, caller=caller, heavy=True)

    async with pool_of(trio, "a", "b", settings=PATIENT) as pool:
        await until(lambda: serving(pool, 2))
        trio.hang("a")
        alone = await asyncio.gather(*(read("x") for _ in range(6)))
        first_y = await read("y")
        with pytest.raises(UpstreamTimeout):  # x's 6 taken (decaying over 5 s) and 1 more are over 10 / 2
            await read("x", 1.0)
        second_y = await read("y")
    assert [a.node for a in alone] == ["b"] * 6
    assert (first_y.node, second_y.node) == ("b", "b")


async def test_the_gateways_answer_budget_full_counts_nothing_against_the_node(trio: Followers) -> None:
    """The process may hold 64 answer bytes: getVersion's answer is over it (getSlot's is not). That is the
    gateway's own state: no other node is asked, none made suspect nor taken out."""
    settings = dataclasses.replace(SETTINGS, buffered_answer_bytes=64)
    version = orjson.dumps(call(1, "getVersion"))
    async with pool_of(trio, "a", "b", "c", settings=settings) as pool:
        await until(lambda: serving(pool, 3))
        with recording() as recorded:
            async with leaving(pool) as out:
                for _ in range(60):
                    with pytest.raises(UpstreamUnavailable, match="holds too many node answers"):
                        await pool.read(version, 5.0, key="getVersion", parse=True)
                assert pool.nodes["a"].suspect_until <= time.monotonic()
        assert (await pool.read(GET_SLOT, 5.0, key="getSlot", parse=True)).node == "a"
    assert asked(recorded) == {"a"}
    assert extra_calls(recorded) == []
    assert out == []

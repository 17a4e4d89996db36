"""The gateway's own slowness never takes a node out of service (issue 83): a node whose probe answers the
pool's owner reads late, because the owner's event loop is held up (a saturated gRPC server owns its pool's
health on its own loop), is judged by the time the node took, not by how late the gateway read it.

A real devnode in its own process; the pool's owner (:class:`gateway.node.health.PoolHealth`) runs on the
test's loop, which the test holds up itself: a callback that blocks for ``HOLD_S`` at every turn of the loop,
longer than the probes' timeout, so every probe's answer is read at least that long after it was sent. No
timing is asserted: the loop is held up for certain; whether the node stayed in service is the assertion. A
node that truly does not answer (stopped with SIGSTOP) still leaves service with the loop free.
"""

from __future__ import annotations

import asyncio
import signal
import time
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from gateway.core.node_health import PoolView
from gateway.core.upstreams import UpstreamNode
from gateway.node.health import HealthSettings, LocalHealth, PoolHealth, Report
from gateway.node.http import UpstreamTimeout
from gateway.node.loop_lag import LoopLag
from gateway.node.pool import NodePool, PoolSettings
from gateway.runtime.devnode_proc import DevnodeProcess
from tests.grpc.client import eventually

TIMEOUT_S = 0.25  # the probes'
HOLD_S = 0.4  # each turn of the held-up loop: longer than a probe's timeout
PROBES = 3  # probes read late, more than the two failed ones in a row that take a node out
CALLS = 4  # calls read late, more than the three failed ones in a row that take a node out
GET_SLOT = b'{"jsonrpc":"2.0","id":1,"method":"getSlot","params":[]}'


@pytest.fixture
async def node(tmp_path: Path) -> AsyncIterator[DevnodeProcess]:
    process = DevnodeProcess(tmp_path / "devnode", 0, 0, 100, 54_000, False)
    await asyncio.to_thread(process.start, 60.0)
    try:
        yield process
    finally:
        await asyncio.to_thread(process.stop)


def only_node(node: DevnodeProcess) -> UpstreamNode:
    """The devnode as the pool's one node."""
    return UpstreamNode(name="only", rpc_url=node.rpc_url)


@pytest.fixture
async def owner(node: DevnodeProcess) -> AsyncIterator[PoolHealth]:
    """The pool's owner of one node, the devnode, once the node is in service."""
    owner = PoolHealth([only_node(node)], HealthSettings(probe_timeout_s=TIMEOUT_S))
    stop = asyncio.Event()
    task = asyncio.create_task(owner.run(stop))
    try:
        await eventually(lambda: any(v.in_service for v in owner.judge_now().nodes), "the node in service")
        yield owner
    finally:
        stop.set()
        await task


class Hog:
    """Holds the loop up for ``HOLD_S`` at every turn (a callback that blocks, then schedules itself for the
    next turn), noting whenever the view (the owner's, or a pool's copy) has the node out of service."""

    def __init__(self, owner: PoolHealth | NodePool) -> None:
        self.owner = owner
        self.outs: list[str] = []
        self.turns = 0
        self.running = True
        asyncio.get_running_loop().call_soon(self.turn)

    def turn(self) -> None:
        if not self.running:
            return
        time.sleep(HOLD_S)  # the loop held up: nothing else runs, the node's answers wait in the socket
        self.turns += 1
        self.outs += [v.reason for v in self.owner.view.nodes if not v.in_service]
        asyncio.get_running_loop().call_soon(self.turn)


async def test_a_node_read_late_by_a_busy_loop_stays_in_service(owner: PoolHealth) -> None:
    state = owner.states["only"]

    def probed() -> int:  # probes since the node came into service, failed or not
        return state.window.totals(time.time()).calls

    before = probed()
    hog = Hog(owner)
    try:
        await eventually(lambda: probed() >= before + PROBES, f"{PROBES} probes while the loop is held up")
    finally:
        hog.running = False
    totals = state.window.totals(time.time())
    assert hog.outs == [], hog.outs
    assert totals.failures == {}, totals
    # the hold-ups were seen as the loop's own: each probe's wait spanned at least one
    assert owner.lag.held() >= (HOLD_S - owner.lag.tick_s - owner.lag.slack_s) * PROBES


def hold_the_loop() -> None:
    time.sleep(HOLD_S)  # blocks the loop that calls it: the hold-up being measured


async def test_the_loop_is_timed_only_while_a_probe_watches() -> None:
    lag = LoopLag()
    hold_the_loop()  # held up, no probe in flight: no timer runs, nothing counted
    await asyncio.sleep(0)
    assert lag.held() == 0.0
    with lag.watching():
        await asyncio.sleep(0)
        hold_the_loop()  # held up with one in flight
        with lag.watching():  # a second probe beside it shares the timer
            await asyncio.sleep(0)
    seen = lag.held()
    hold_the_loop()
    await asyncio.sleep(lag.tick_s * 3)
    assert HOLD_S - lag.tick_s - lag.slack_s <= seen == lag.held()  # the hold-up watched; none after it


class ToldHealth(LocalHealth):
    """The pool's owner in this process, keeping every report a pool hands it."""

    def __init__(self, owner: PoolHealth) -> None:
        super().__init__(owner)
        self.reports: list[Report] = []

    async def exchange(self, report: Report, known_version: int) -> PoolView | None:
        self.reports.append(report)
        return await super().exchange(report, known_version)


async def test_a_pool_whose_loop_is_held_up_does_not_blame_its_node(node: DevnodeProcess) -> None:
    """A process's calls time out because its own loop is held up (a replica saturated under load): the
    timeouts are the gateway's slowness, not the node's. Nothing of them reaches the owner (with them, a node
    of several leaves service: Thresholds.failing_calls), and the node is not made suspect."""
    settings = PoolSettings(exchange_s=0.1, health=HealthSettings(probe_timeout_s=TIMEOUT_S, judge_s=0.05))
    owner = ToldHealth(PoolHealth([only_node(node)], settings.health))
    pool = NodePool([only_node(node)], settings, source=owner)
    await pool.start()
    try:
        await eventually(lambda: all(v.in_service for v in pool.view.nodes), "the node in service")
        hog = Hog(pool)
        try:  # at once: all within the seconds Thresholds.failing_calls counts over
            ended = await asyncio.gather(
                *(pool.read(GET_SLOT, TIMEOUT_S) for _ in range(CALLS)), return_exceptions=True
            )
        finally:
            hog.running = False
        suspect = pool.nodes["only"].suspect_until > time.monotonic()
        await asyncio.sleep(settings.exchange_s * 3)  # every tally handed over
    finally:
        await pool.close()
        await owner.close()
    assert [type(e) for e in ended] == [UpstreamTimeout] * CALLS  # each answer read after its timeout
    told = [tally for report in owner.reports for tally in report.values()]
    assert [t.failures for t in told if t.failures] == [] and not suspect, (told, suspect)


async def test_a_node_that_does_not_answer_leaves_service_with_the_loop_free(
    node: DevnodeProcess, owner: PoolHealth
) -> None:
    node.signal(signal.SIGSTOP)
    try:
        await eventually(lambda: not owner.judge_now().nodes[0].in_service, "the hung node out of service")
    finally:
        node.signal(signal.SIGCONT)
    reason = owner.view.nodes[0].reason
    assert reason.startswith(f"not answering: no answer within {TIMEOUT_S:g} s"), reason

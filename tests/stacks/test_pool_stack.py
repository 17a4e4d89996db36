"""``gateway up --nodes 3`` as an operator runs it: the devnode and three followers of it as the pool, the
``upstream-health`` actor judging them for every replica and actor, ``gateway fund``, ``gateway status`` and
``gateway upstreams`` against it, and a follower killed (kill -9) under paid calls.

What is asserted: outcomes (the node that answered, each call's status, the audit row), never times; a
change of the pool is waited for with a generous deadline.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path

import asyncpg
import pytest

from gateway.runtime.devnode_proc import FOLLOWERS, PIDFILE
from gateway.runtime.inspect import embedded_database_url
from tests.integration.service import RunningService, post_json, service_env, start_service, stop_service

GATEWAY = Path(sys.executable).with_name("gateway")
GET_SLOT = {"jsonrpc": "2.0", "id": 1, "method": "getSlot"}

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def pool(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningService]:
    home = tmp_path_factory.mktemp("pool-stack")
    env = service_env(
        home,
        GATEWAY_DEVNODE_NODES="3",
        GATEWAY_DEVNODE_RETENTION_SLOTS="54000",
        GATEWAY_HEALTH_POLL_S="0.1",
        GATEWAY_UPSTREAM_PROBE_TIMEOUT_S="0.5",
        GATEWAY_UPSTREAM_OUT_AT_LEAST_S="1",
        GATEWAY_RATE_LIMIT_RPS="100000",  # the calls are the load: none refused for the account's rate
    )
    service = start_service(home, env)
    try:
        yield service
    finally:
        code, alive = stop_service(service)
        assert code == 0 and alive == [], (code, alive)  # the followers stopped with the rest


def gateway(service: RunningService, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(GATEWAY), *args], env=service.env, capture_output=True, text=True, timeout=120)


@pytest.fixture(scope="module")
def api_key(pool: RunningService) -> str:
    funded = gateway(pool, "fund")  # the devnode leads the pool: test USDC minted there, credited through it
    assert funded.returncode == 0, funded.stderr
    return funded.stdout.strip().splitlines()[-1]


def answered_by(service: RunningService, key: str) -> str:
    status, doc, headers = post_json(service.url + "/", GET_SLOT, {"X-Api-Key": key})
    assert status == 200 and isinstance(doc["result"], int), doc
    return headers["x-upstream"]


def until(condition: Callable[[], bool], within_s: float = 30.0) -> None:
    deadline = time.monotonic() + within_s
    while not condition():
        assert time.monotonic() < deadline, "condition not reached in time"
        time.sleep(0.1)


def test_status_and_calls_see_the_pool_of_three(pool: RunningService, api_key: str) -> None:
    done = gateway(pool, "status", "--json")
    parts = {p["name"]: p for p in json.loads(done.stdout)["parts"]}
    nodes = {name: part for name, part in parts.items() if name.startswith("upstream ")}
    assert sorted(nodes) == ["upstream node-1", "upstream node-2", "upstream node-3"], sorted(parts)
    assert all(p["state"] == "up" and p["data"]["lag"] is not None for p in nodes.values()), nodes
    assert "127.0.0.1:" not in json.dumps(nodes)  # named, never by their URLs
    assert parts["actor upstream-health"]["state"] == "up"
    assert answered_by(pool, api_key) == "node-1"  # the first node in service, in every replica


def test_a_cordon_moves_the_calls_and_is_in_the_audit(pool: RunningService, api_key: str) -> None:
    done = gateway(pool, "upstreams", "cordon", "node-1", "--reason", "kernel upgrade", "--operator", "ops-test")
    assert done.returncode == 0, done.stderr
    until(lambda: answered_by(pool, api_key) == "node-2")
    listed = json.loads(gateway(pool, "upstreams", "list", "--json").stdout)["nodes"]
    assert (listed[0]["name"], listed[0]["state"]) == ("node-1", "cordoned"), listed
    assert gateway(pool, "upstreams", "cordon", "node-1", "--reason", "again").returncode == 1  # already
    done = gateway(pool, "upstreams", "uncordon", "node-1", "--reason", "done", "--operator", "ops-test")
    assert done.returncode == 0, done.stderr
    until(lambda: answered_by(pool, api_key) == "node-1")  # back after the breaker (1 s here) and good probes

    async def audit() -> list[tuple[str, str]]:
        url = embedded_database_url(pool.home)
        assert url is not None
        conn = await asyncpg.connect(url)
        try:
            rows = await conn.fetch("SELECT action, detail::text AS detail FROM operator_actions ORDER BY id")
        finally:
            await conn.close()
        return [(r["action"], json.loads(r["detail"])["node"]) for r in rows if r["action"].startswith("upstream_")]

    assert asyncio.run(audit()) == [("upstream_cordon", "node-1"), ("upstream_uncordon", "node-1")]


def test_a_follower_killed_under_paid_calls_costs_them_nothing(pool: RunningService, api_key: str) -> None:
    statuses: Counter[int] = Counter()
    nodes: list[str] = []
    stop = threading.Event()

    def call() -> None:
        while not stop.is_set():
            status, _, headers = post_json(pool.url + "/", GET_SLOT, {"X-Api-Key": api_key})
            statuses[status] += 1
            if status == 200:
                nodes.append(headers["x-upstream"])

    callers = [threading.Thread(target=call) for _ in range(4)]
    for t in callers:
        t.start()
    until(lambda: nodes.count("node-1") >= 30)
    pid = int((pool.home / FOLLOWERS / "node-1" / PIDFILE).read_text().split()[0])  # the devnode, then its starter
    os.kill(pid, signal.SIGKILL)
    at_kill = len(nodes)
    until(lambda: sum(1 for n in nodes[at_kill:] if n != "node-1") >= 60)
    stop.set()
    for t in callers:
        t.join()
    assert statuses == Counter({200: statuses[200]}), statuses  # not one call failed
    done = gateway(pool, "status", "--json")
    node_1 = {p["name"]: p for p in json.loads(done.stdout)["parts"]}["upstream node-1"]
    assert node_1["state"] == "warn" and node_1["data"]["state"] == "out", node_1
    assert done.returncode == 0  # one node out of three is a warning, not a part down

"""``gateway up --nodes 3`` as an operator runs it: the devnode and three followers of it as the pool, the
``upstream-health`` actor judging them for every replica and actor, ``gateway fund``, ``gateway status`` and
``gateway upstreams`` against it, a caller whose errors repeat "node is behind" beside another tenant, and a
follower killed (kill -9) under paid calls.

What is asserted: outcomes (the node that answered, each call's status, the audit row, the requests each node
was sent as the gateway's processes counted them), never times; a change of the pool is waited for with a
generous deadline. Hedges wait 5 s here (``upstream_hedge_min_ms``; tests/node tests them): a call that
reaches a second node in this module is a retry.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
import urllib.request
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

#: In this order, also in a shuffled run (pytest-random-order): the tests are steps on one stack, and a follower
#: killed by the last is not started again; the tenant test starts once the cordon test's node is back first.
pytestmark = [pytest.mark.integration, pytest.mark.random_order(disabled=True)]


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
        GATEWAY_UPSTREAM_HEDGE_MIN_MS="5000",  # no hedge: a second node asked is a retry (module docstring)
        RAY_metrics_report_interval_ms="1000",  # each process's counts reach the metrics port within a second
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


#: The histogram's count as Ray's exporter names it: a counter, to whose name it adds ``_total`` (ops/prometheus.yml).
REQUESTS = "ray_gateway_upstream_request_duration_seconds_count_total{"


def node_requests(service: RunningService) -> Counter[str]:
    """JSON-RPC requests sent to each node by every process of the stack, whatever their outcome
    (``gateway_upstream_request_duration_seconds``, as Ray's metrics agent exports it); the probes are not
    among them."""
    url = f"http://127.0.0.1:{service.env['GATEWAY_METRICS_EXPORT_PORT']}/metrics"
    with urllib.request.urlopen(url, timeout=10) as resp:
        text = resp.read().decode()
    total: Counter[str] = Counter()
    for line in text.splitlines():
        if line.startswith(REQUESTS):
            labels = dict(re.findall(r'(\w+)="([^"]*)"', line))
            total[labels["node"]] += int(float(line.rsplit(" ", 1)[1]))
    return total


def steady_requests(service: RunningService, nodes: tuple[str, ...] = ("node-2", "node-3")) -> Counter[str]:
    """:func:`node_requests` once two reads more than a report interval apart agree on ``nodes`` (what was sent
    them before has been exported; the first node's count moves all the time: the gateway's own reads)."""
    deadline = time.monotonic() + 60
    before = node_requests(service)
    while True:
        time.sleep(1.5)
        now = node_requests(service)
        if all(now[n] == before[n] for n in nodes):
            return now
        assert time.monotonic() < deadline, f"requests to {nodes} never settled: {before}, {now}"
        before = now


#: An encoding no node knows: the node's -32602 repeats it (devnode/encoding.py, as Agave's does).
SYSTEM = "11111111111111111111111111111111"


def behind(i: int) -> dict[str, object]:
    return {"jsonrpc": "2.0", "id": i, "method": "getAccountInfo", "params": [SYSTEM, {"encoding": "node is behind"}]}


def test_a_caller_whose_errors_say_node_is_behind_moves_no_node(
    pool: RunningService, api_key: str, tmp_path: Path
) -> None:
    """Issue 83: 15 such calls a second for 4 s (every third a batch of 21 holding one) beside another tenant
    calling getSlot. Each is answered by the first node alone, no node leaves service, the other tenant's calls
    all succeed on the first node, and the other nodes are sent nothing."""
    other = gateway(pool, "fund", "--wallet", str(tmp_path / "other-tenant.json"))  # another account
    assert other.returncode == 0, other.stderr
    other_key = other.stdout.strip().splitlines()[-1]
    assert other_key != api_key
    until(lambda: answered_by(pool, api_key) == "node-1")  # after the cordon test: node-1 first again
    baseline = steady_requests(pool)
    theirs: list[tuple[int, str, object]] = []
    stop = threading.Event()

    def other_tenant() -> None:
        while not stop.is_set():
            status, doc, headers = post_json(pool.url + "/", GET_SLOT, {"X-Api-Key": other_key})
            theirs.append((status, headers.get("x-upstream", ""), doc.get("result") if isinstance(doc, dict) else doc))

    caller = threading.Thread(target=other_tenant)
    caller.start()
    answers: list[tuple[int, str, object]] = []
    try:
        for i in range(60):  # 15 a second for 4 s
            started = time.monotonic()
            body: object = behind(i)
            if i % 3 == 0:
                body = [behind(0)] + [{"jsonrpc": "2.0", "id": n, "method": "getSlot"} for n in range(1, 21)]
            status, doc, headers = post_json(pool.url + "/", body, {"X-Api-Key": api_key})
            answers.append((status, headers.get("x-upstream", ""), doc))
            time.sleep(max(0.0, 1 / 15 - (time.monotonic() - started)))
    finally:
        stop.set()
        caller.join()
    for status, node, doc in answers:
        first = doc[0] if isinstance(doc, list) else doc
        assert (status, node) == (200, "node-1"), (status, node, doc)
        assert isinstance(first, dict) and first["error"]["code"] == -32602, doc
        assert "node is behind" in first["error"]["message"]
        if isinstance(doc, list):
            assert len(doc) == 21 and all(isinstance(item["result"], int) for item in doc[1:]), doc
    assert theirs and all(status == 200 and isinstance(result, int) for status, _, result in theirs), theirs[-3:]
    assert {node for _, node, _ in theirs} == {"node-1"}  # node-1 never left service in any replica
    sent = len(answers) + len(theirs)  # one node request each, at least: the first node's
    until(lambda: node_requests(pool)["node-1"] - baseline["node-1"] >= sent)
    after = steady_requests(pool)
    assert (after["node-2"] - baseline["node-2"], after["node-3"] - baseline["node-3"]) == (0, 0), (baseline, after)
    done = gateway(pool, "status", "--json")
    parts = {p["name"]: p for p in json.loads(done.stdout)["parts"]}
    states = {name: parts[f"upstream {name}"]["state"] for name in ("node-1", "node-2", "node-3")}
    assert states == {"node-1": "up", "node-2": "up", "node-3": "up"}, states


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

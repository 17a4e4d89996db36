"""A real two-node Ray cluster on this machine, started from ``cluster.yaml``, and a node lost under paid load.

The head and the worker run the file's start commands (:mod:`tests.cluster.nodes` lists what differs on one
machine); ``gateway up`` joins the head as an operator's would (``RAY_ADDRESS``, ``GATEWAY_HOST=0.0.0.0``)
with two ingress replicas at most one per node, and two account shards, two send racers and two webhook
dispatchers, each pool spread over the nodes. Both nodes' HAProxies reach both replicas. A funded customer
calls ``getSlot`` from several connections, past its rate, and every process of the worker node is
SIGKILLed (its raylet, its workers, its HAProxy). Then:

- every answer is 200, 429 or 503; a connection lost (or HAProxy's 502) only within a short bound after
  the kill, for calls the dead node's HAProxy or replica held;
- the service answers through the head's replica alone (the lost one waits for a second node); the actors
  that lived on the worker are started again on the head and answer their ``status()`` (``gateway status``,
  which says where each runs), the shard with a new epoch;
- the ledger is exact: the conservation audit is clean (``gateway audit`` too), the consumption is the
  price times the calls answered less at most the dead replica's unsettled calls (plus at most the lost
  connections, whose calls the head's replica may have answered and charged), and no lease is left
  live: the head's replicas released theirs, the dead one's expired;
- a second customer's ``sendAndConfirm`` transfers (one every 2 s, before and after the kill) to a sink
  its webhook watches: every hold is settled as the chain says, the sink holds exactly the confirmed
  transfers, and each confirmed one's webhook event is delivered once, none dead.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp
import asyncpg
import pytest
from solana.rpc.async_api import AsyncClient
from solders.keypair import Keypair

from gateway.app.settings import Settings
from gateway.runtime.serve_runtime import ingress_env
from gateway.storage.ledger.audit import check_conservation
from gateway.transports.ray_edge import CALLBACK_IMPORT_PATH
from tests.cluster.nodes import HEAD_IP, WORKER_IP, Cluster, make_cluster, start_commands
from tests.faults.load import (
    Load,
    Receiver,
    chain_outcomes,
    check_deliveries,
    check_sends_match_chain,
    cli_json,
    create_webhook,
    new_customer,
    wait_deliveries,
    wait_sends_settled,
)
from tests.integration.service import RunningService, fetch, service_env, start_service, stop_service

pytestmark = pytest.mark.integration

GATEWAY = Path(sys.executable).with_name("gateway")
BODY = b'{"jsonrpc":"2.0","id":1,"method":"getSlot"}'
RPS = 40  # the account's rate (and burst)
WORKERS = 8
LEASE_TTL_S = 6.0  # a dead replica's lease holds credits this long (4 flushes at least)
KILL_BOUND_S = 10.0  # after the kill, calls may lose their connection this long
REPLACED_WITHIN_S = 60.0
#: Ray's and Serve's settings ``gateway up`` gives a Ray of its own that differ per machine (files, ports,
#: HAProxy's threads): every other one must be in both start commands of ``cluster.yaml``.
PER_MACHINE = {
    "RAY_SERVE_HAPROXY_NBTHREAD",
    "RAY_SERVE_HAPROXY_CONFIG_FILE_LOC",
    "RAY_SERVE_HAPROXY_SOCKET_PATH",
    "RAY_SERVE_HAPROXY_SERVER_STATE_BASE",
    "RAY_SERVE_HAPROXY_SERVER_STATE_FILE",
    "RAY_SERVE_HAPROXY_STATS_PORT",
    "RAY_SERVE_HAPROXY_METRICS_PORT",
    "RAY_SERVE_FALLBACK_PROXY_HTTP_PORT",
    "RAY_SERVE_FALLBACK_PROXY_GRPC_PORT",
}
CONSUMED = (
    "SELECT COALESCE(-sum(amount), 0)::bigint FROM ledger_entries WHERE pubkey = $1 AND type IN ('debit', 'refund')"
)
LIVE_LEASES = "SELECT count(*) FROM credit_leases WHERE pubkey = $1 AND NOT released AND expires_at > now()"


def test_cluster_yaml_gives_every_node_the_serve_settings_of_gateway_up() -> None:
    """On a cluster, Ray's processes on each machine read Serve's settings from that machine's ``ray start``,
    never from ``gateway up``; the ones a local Ray gets from it must be in the file's commands."""
    wanted = set(ingress_env(Settings(ingress_mode="haproxy"), "/tmp/unused")) - PER_MACHINE
    for role in ("head", "worker"):
        (command,) = [c for c in start_commands(role) if "ray start" in c]
        missing = sorted(name for name in wanted if f"{name}=" not in command)
        assert not missing, f"cluster.yaml {role}_start_ray_commands lacks {missing}"
        # an import path that moved would stop every node's proxy at start: the value must be today's
        assert f"RAY_SERVE_HTTP_PROXY_CALLBACK_IMPORT_PATH={CALLBACK_IMPORT_PATH} " in command


@dataclass
class Calls:
    """Per call: when it was sent and answered (the loop's clock) and its status (0: the connection was lost)."""

    sent: list[float] = field(default_factory=list)
    answered: list[float] = field(default_factory=list)
    statuses: list[int] = field(default_factory=list)
    results: int = 0


async def hammer(url: str, key: str, calls: Calls, stop: asyncio.Event) -> None:
    """WORKERS connections, each calling as fast as it is answered, until ``stop``."""
    loop = asyncio.get_running_loop()
    timeout = aiohttp.ClientTimeout(total=10)
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=WORKERS), timeout=timeout) as http:

        async def worker() -> None:
            while not stop.is_set():
                sent = loop.time()
                try:
                    async with http.post(url, data=BODY, headers={"X-Api-Key": key}) as resp:
                        body = await resp.json(content_type=None)
                        status = resp.status
                except (aiohttp.ClientError, TimeoutError, ValueError):
                    status, body = 0, None
                calls.sent.append(sent)
                calls.answered.append(loop.time())
                calls.statuses.append(status)
                if status == 200 and isinstance(body, dict) and "result" in body:
                    calls.results += 1
                if status != 200:
                    await asyncio.sleep(0.05)  # refused or lost: not again in a spin (2 cores, shared)

        await asyncio.gather(*(worker() for _ in range(WORKERS)))


def gateway_status(service: RunningService) -> dict[str, Any]:
    """``gateway status --json`` as an operator runs it: the parts by name (it exits 1 while one is down)."""
    done = subprocess.run(
        [str(GATEWAY), "status", "--json"], env=service.env, capture_output=True, text=True, timeout=120, check=False
    )
    assert done.stdout.strip(), done.stderr
    return {part["name"]: part for part in json.loads(done.stdout)["parts"]}


def placement(parts: dict[str, Any]) -> dict[str, str | None]:
    """Each named actor's node; the Serve replicas as ``replicas`` (their nodes, comma-separated)."""
    where = {
        name.removeprefix("actor "): p["data"].get("node") for name, p in parts.items() if name.startswith("actor ")
    }
    # a read cut short (the cluster slow to answer just after the kill) has no deployments: no replica placed yet
    nodes = parts["Serve"]["data"].get("deployments", {}).get("Ingress", {}).get("nodes", {})
    where["replicas"] = ",".join(sorted(node for node, n in nodes.items() for _ in range(n)))
    return where


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    running = make_cluster(tmp_path_factory.mktemp("cluster") / "ray-start.log")
    try:
        for node in running.nodes:
            running.start_node(node)
        yield running
    finally:
        running.stop()


@pytest.fixture(scope="module")
def service(cluster: Cluster, tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningService]:
    home = tmp_path_factory.mktemp("cluster-home")
    env = service_env(
        home,
        **cluster.driver_env(),
        GATEWAY_HOST="0.0.0.0",  # HAProxy on each node must reach the replicas of the other (docs/configuration.md)
        GATEWAY_PUBLIC_URL="https://rpc.example.com",  # a routable host names its public origin
        GATEWAY_EDGE_SECRET=cluster.edge_secret,
        GATEWAY_INGRESS_REPLICAS="2",
        GATEWAY_INGRESS_REPLICAS_PER_NODE="1",  # one on each node, so the kill takes one of them
        GATEWAY_ACCOUNT_SHARDS="2",
        GATEWAY_SEND_RACERS="2",
        GATEWAY_WEBHOOK_DISPATCHERS="2",
        GATEWAY_GRPC_SERVERS="0",
        GATEWAY_RATE_LIMIT_RPS=str(RPS),
        GATEWAY_LEASE_TTL_S=str(LEASE_TTL_S),
        GATEWAY_DEVNODE_RETENTION_SLOTS="6000",  # 10 min of blocks: every send's fate stays provable
        GATEWAY_WEBHOOK_DELIVERY_TIMEOUT_S="3",
        GATEWAY_WEBHOOK_LEASE_S="8",  # a dead dispatcher's claimed jobs are claimed again 8 s on
    )
    running = start_service(home, env, new_session=True)
    yield running
    if running.process.poll() is None:
        stop_service(running)


async def test_the_worker_node_lost_under_paid_load_loses_nothing(cluster: Cluster, service: RunningService) -> None:
    log = service.log.read_text()
    assert "joined cluster" in log and "(2 nodes)" in log, log[-3000:]
    assert "won't accept connections from HAProxy on other nodes" not in log, log[-3000:]  # Serve's host warning
    before = await asyncio.to_thread(gateway_status, service)
    where = placement(before)
    assert where["replicas"] == f"{HEAD_IP},{WORKER_IP}", where
    on_worker = {name for name, node in where.items() if node == WORKER_IP and name != "replicas"}
    kinds = ("account-shard-", "send-racer-", "webhook-dispatcher-")
    assert all(any(name.startswith(kind) for name in on_worker) for kind in kinds), sorted(where.items())
    for node in cluster.nodes:  # each node's HAProxy reaches both replicas, its own and the other's
        deadline = time.monotonic() + 15  # HAProxy marks a new server up after its health checks
        while list((servers := await asyncio.to_thread(node.haproxy_servers)).values()) != ["UP", "UP"]:
            assert time.monotonic() < deadline, (node.role, servers)
            await asyncio.sleep(0.5)
    for _ in range(6):  # Ray's X-Request-ID is taken off: the gateway's edge runs on both nodes
        status, _, headers = await asyncio.to_thread(fetch, f"{service.url}/health", None, {})
        assert status == 200 and "x-request-id" not in headers, headers

    # A reader (the paid load) and a payer whose sendAndConfirm transfers to a sink its webhook watches.
    receiver = Receiver()
    hook_url = await receiver.start()
    payer = await new_customer(service, "payer", 1_000_000)
    sink = Keypair().pubkey()
    await create_webhook(service.url, payer, {"url": hook_url, "filter_type": "account", "filter_value": str(sink)})
    # the webhook watcher follows a new webhook within about 5 s (docs/api.md, Payloads)
    reader, _ = await asyncio.gather(new_customer(service, "reader", 1_000_000), asyncio.sleep(6))
    _, pricing, _ = await asyncio.to_thread(fetch, f"{service.url}/pricing", None, {})
    price = next(c["credits"] for c in pricing["classes"].values() if "getSlot" in c["methods"])
    pubkey = str(reader.wallet.pubkey())

    calls, stop = Calls(), asyncio.Event()
    load = asyncio.create_task(hammer(f"{service.url}/", reader.api_key, calls, stop))
    sends = Load(service, [], payer, sink, phase="before")
    await sends.start()
    sends.running.set()
    await asyncio.sleep(4)
    loop = asyncio.get_running_loop()
    killed_at = loop.time()
    victims = await asyncio.to_thread(cluster.worker.kill)
    sends.phase = "after"
    after: dict[str, Any] = {}
    while True:  # until the worker's replica and actors run again on the head
        after = await asyncio.to_thread(gateway_status, service)
        moved = placement(after)
        # the lost replica waits for a second node (one per node); the lost actors start on the head
        replaced = moved["replicas"] == HEAD_IP and all(moved[name] == HEAD_IP for name in on_worker)
        if replaced and all(after[f"actor {name}"]["state"] == "up" for name in on_worker):
            break
        assert loop.time() - killed_at < REPLACED_WITHIN_S, (moved, {n: after.get(f"actor {n}") for n in on_worker})
        await asyncio.sleep(1)
    replaced_s = loop.time() - killed_at
    await asyncio.sleep(3)  # calls through the head alone
    stop.set()
    await asyncio.gather(load, sends.close())
    assert "raylet" in victims and "haproxy" in victims, victims  # the node's own and the gateway's edge
    assert not cluster.worker.processes(), "a process of the worker node survived"

    db = await asyncpg.connect(f"postgresql://postgres:@/gateway?host={service.home / 'postgres'}")
    try:
        deadline = time.monotonic() + LEASE_TTL_S + 15  # the head's replicas release theirs once idle
        while await db.fetchval(LIVE_LEASES, pubkey) > 0:
            assert time.monotonic() < deadline, "a credit lease is still live"
            await asyncio.sleep(0.5)
        consumed = await db.fetchval(CONSUMED, pubkey)
        report = await check_conservation(db, pubkey)
        # Every send hold is settled as the chain says (the racer and the replica on the worker died with
        # races under way), the sink holds exactly the confirmed transfers, and each one's webhook event is
        # delivered once (the worker's dispatcher died with its claimed jobs).
        settle_s = await wait_sends_settled(service, timeout_s=90)
        sent = {c.signature: c.lamports for c in sends.calls if c.signature}
        landed = await chain_outcomes(service.node_url, list(sent))
        wrong_sends = await check_sends_match_chain(db, landed)
        confirmed = {
            r["signature"]
            for r in await db.fetch(
                "SELECT signature FROM sends WHERE status = 'confirmed' AND signature = ANY($1::text[])", list(sent)
            )
        }
        payer_report = await check_conservation(db, str(payer.wallet.pubkey()))
    finally:
        await db.close()
    async with AsyncClient(service.node_url) as node:
        sink_lamports = (await node.get_balance(sink)).value
    expected = {("transaction", sig) for sig in confirmed}
    await wait_deliveries(receiver, expected, timeout_s=60)
    lost_events, twice = check_deliveries(receiver, expected)
    dead = await cli_json(service, "webhooks", "dead")
    await receiver.stop()

    before_kill = [s for t, s in zip(calls.answered, calls.statuses, strict=True) if t < killed_at]
    settled = [s for t, s in zip(calls.sent, calls.statuses, strict=True) if t > killed_at + KILL_BOUND_S]
    counts = {code: calls.statuses.count(code) for code in sorted(set(calls.statuses))}
    lost = calls.results * price - consumed
    print(
        f"\ntwo nodes: killed the worker's {len(victims)} processes ({', '.join(sorted(set(victims)))}); "
        f"{sorted(on_worker)} on the head again {replaced_s:.1f} s later; {len(calls.statuses)} calls {counts}; "
        f"consumed {consumed} of {calls.results} x {price} answered (answered less consumed: {lost // price} calls); "
        f"{len(sent)} sends {sorted(Counter((c.phase, c.status, c.outcome) for c in sends.calls).items())} "
        f"({len(confirmed)} confirmed) settled {settle_s:.0f} s after the load, "
        f"{receiver.posts} webhook posts"
    )
    assert len(confirmed) >= 4 and not wrong_sends, wrong_sends
    assert sink_lamports == sum(sent[sig] for sig in confirmed), (sink_lamports, sent, confirmed)
    assert not lost_events and not twice and not dead, (lost_events, twice, dead)
    assert payer_report.ok, payer_report
    assert set(before_kill) <= {200, 429} and set(settled) <= {200, 429, 503}, counts
    assert set(counts) <= {0, 200, 429, 502, 503} and counts.get(429, 0) > 0, counts  # past the rate: tested
    assert settled.count(200) >= 10, counts  # the head's replica answers
    assert report.ok, report
    # The dead replica's usage not yet flushed is lost, in the customer's favour: at most its share of the
    # calls admitted in one flush interval and the calls in flight at the kill. The other way, a call whose
    # connection the dead node's HAProxy held (both nodes' HAProxies share the port) may have been answered by
    # the head's replica, which charges it as sent (docs/api.md, a caller disconnected after the call was
    # sent): at most one a lost connection.
    assert -counts.get(0, 0) * price <= lost <= (RPS + WORKERS) * price, (consumed, calls.results, counts)
    for name in on_worker:
        actor = after[f"actor {name}"]["data"]
        assert actor["restarts"] >= 1 and "status" in actor, (name, actor)
    shards = [after[f"actor {n}"]["data"]["status"] for n in on_worker if n.startswith("account-shard-")]
    old = {before[f"actor account-shard-{s['index']}"]["data"]["status"]["epoch"] for s in shards}
    assert all(s["epoch"] not in old for s in shards), shards  # restarted: a new epoch, no state

    audit = await asyncio.to_thread(
        subprocess.run,
        [str(GATEWAY), "audit", "--json"],
        env=service.env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert audit.returncode == 0, audit.stdout + audit.stderr

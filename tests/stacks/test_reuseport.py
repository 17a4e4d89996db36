"""``ingress_mode = "reuseport"`` through the whole service (``gateway up``): two ingress replicas in Ray listen
on the service port themselves, no HAProxy runs, a paid call is answered and charged through the port with the
gateway's edge in front (Serve's control headers from a client stripped), and the per-source connection cap
reaches the replicas from the operator's environment; a replica killed with ``kill -9``, or stopped with SIGSTOP until
Serve's health check kills it, leaves the port to the other until Serve's replacement joins it.

The listener's own behaviour (the kernel spreading connections, the cap, the idle and rebalancing closes,
the drain) is tests/runtime/test_shared_port.py; autoscaling and drain in this mode are
tests/stacks/test_autoscaling.py's second parameter.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import psutil
import pytest

from gateway.runtime.leftovers import running
from gateway.runtime.serve_runtime import processes_naming
from tests.integration.service import (
    INGRESS_REPLICA,
    RunningService,
    post_json,
    service_env,
    start_service,
    stop_service,
)

pytestmark = pytest.mark.integration

GATEWAY = Path(sys.executable).with_name("gateway")
REPLICAS = 2
CAP = 4  # connections per source, per replica
#: Each fault test's own source address (all of 127/8 is loopback): the cap counts per source, and the cap
#: test's connections from 127.0.0.1 may still be closing on a replica when they start.
KILL_SOURCE, STOP_SOURCE = "127.0.0.2", "127.0.0.3"
FUNDED = 1_000_000  # the credits `gateway fund` buys


@pytest.fixture(scope="module")
def service(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningService]:
    home = tmp_path_factory.mktemp("reuseport")
    env = service_env(
        home,
        GATEWAY_INGRESS_MODE="reuseport",
        GATEWAY_INGRESS_REPLICAS=str(REPLICAS),
        GATEWAY_EDGE_CONNECTIONS_PER_SOURCE=str(CAP),
        GATEWAY_GRPC_SERVERS="0",
        GATEWAY_SEND_RACERS="0",
        GATEWAY_WEBHOOK_DISPATCHERS="0",
    )
    running = start_service(home, env)
    try:
        yield running
    finally:
        code, alive = stop_service(running)
        assert code == 0 and alive == [], (code, alive)


def listeners(port: int, among: list[psutil.Process]) -> set[int]:
    found = set()
    for proc in among:
        try:
            if any(c.status == psutil.CONN_LISTEN and c.laddr.port == port for c in proc.net_connections("tcp")):
                found.add(proc.pid)
        except psutil.Error:
            continue
    return found


def test_every_replica_listens_on_the_service_port_and_no_haproxy_runs(service: RunningService) -> None:
    descendants = service.descendants()
    replicas = {p.pid for p in processes_naming(INGRESS_REPLICA, among=descendants)}
    assert len(replicas) == REPLICAS
    assert listeners(int(service.env["GATEWAY_PORT"]), descendants) == replicas
    assert processes_naming("haproxy", among=descendants) == []


def test_a_paid_call_through_the_port_is_answered_and_charged(service: RunningService) -> None:
    """Exact billing through the port, calls counted against the ledger, is test_autoscaling's."""
    funded = subprocess.run([str(GATEWAY), "fund"], env=service.env, capture_output=True, text=True, timeout=120)
    assert funded.returncode == 0, funded.stderr
    key = funded.stdout.strip().splitlines()[-1]
    body = {"jsonrpc": "2.0", "id": 1, "method": "getSlot"}
    status, doc, headers = post_json(f"{service.url}/", body, {"X-Api-Key": key})
    assert status == 200 and isinstance(doc["result"], int), doc
    assert int(headers["x-credits-remaining"]) == FUNDED - 1  # getSlot's price, 1 credit
    status, doc, _ = post_json(f"{service.url}/", body, {"X-Api-Key": "not-a-key"})
    assert status == 401, doc

    # The edge is in front of the port as of Serve's: Serve's control headers from a client are stripped
    # (a timeout of 1 ms would have Serve cancel the call), and the request id is the replica's.
    controls = {"x-request-timeout-seconds": "0.001", "x-request-disconnect-disabled": "?1", "x-request-id": "mine"}
    status, doc, headers = post_json(f"{service.url}/", body, {"X-Api-Key": key, **controls})
    assert status == 200 and isinstance(doc["result"], int), doc
    assert re.fullmatch("[0-9a-f]{32}", headers["x-request-id"]), headers


async def test_one_source_holds_at_most_the_cap_on_each_replica(service: RunningService) -> None:
    """9 connections from one address, over two replicas capped at 4 each: at least one is closed unanswered,
    whichever replicas the kernel chose (at most 8 can be held), and at least 4 are answered."""
    port = int(service.env["GATEWAY_PORT"])
    opened = [await asyncio.open_connection("127.0.0.1", port) for _ in range(REPLICAS * CAP + 1)]
    answered = 0
    for reader, writer in opened:
        writer.write(b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n")
        try:
            await writer.drain()
            head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 10)
            answered += head.startswith(b"HTTP/1.1 200")
        except (ConnectionError, asyncio.IncompleteReadError):
            pass
    for _, writer in opened:
        writer.close()
    assert CAP <= answered <= REPLICAS * CAP, answered


async def test_a_replica_killed_leaves_the_port_to_the_others_until_serve_replaces_it(
    service: RunningService,
) -> None:
    """``kill -9`` of one replica: its listener goes with the process, so every new connection to the port
    reaches the survivor (the kernel's SO_REUSEPORT group loses the closed socket; no HAProxy marks anything
    down), and Serve's replacement joins the port."""
    port = int(service.env["GATEWAY_PORT"])
    replicas = processes_naming(INGRESS_REPLICA, among=service.descendants())
    assert len(replicas) == REPLICAS
    victim, survivors = replicas[0], {p.pid for p in replicas[1:]}
    victim.kill()
    # exited, so its files are closed (a process being killed may already be missing from the listing)
    await until(lambda: not running(victim.pid), "the killed replica exited")
    await until(lambda: listeners(port, service.descendants()) <= survivors, "the killed replica's listener closed")

    for _ in range(20):  # each on a connection of its own, so each is the kernel's choice again
        assert await health(port, KILL_SOURCE) == b"HTTP/1.1 200 OK"

    await until(lambda: replaced(service, victim), "Serve's replacement listening on the port", timeout_s=180)
    for _ in range(20):
        assert await health(port, KILL_SOURCE) == b"HTTP/1.1 200 OK"


async def test_a_stopped_replica_is_killed_by_serves_health_check_and_leaves_the_port(
    service: RunningService,
) -> None:
    """SIGSTOP of one replica: its listener stays open, and the kernel keeps handing it its share of new
    connections, which nobody accepts. Serve's health check (``ingress_health_check_*``, 2 s and 3 s) finds it
    silent three times in a row and kills it at once (``RAY_SERVE_FORCE_STOP_UNHEALTHY_REPLICAS``), so its listener
    goes with the process as after ``kill -9``, and Serve's replacement joins the port. 15 s here; with Serve's
    graceful stop of an unhealthy replica (32 s before the kill) it took 48 s, past this test's bound, and with
    Serve's own health-check defaults (10 s and 30 s) it would take over two minutes."""
    port = int(service.env["GATEWAY_PORT"])
    await until(lambda: len(processes_naming(INGRESS_REPLICA, among=service.descendants())) == REPLICAS, "replicas")
    replicas = processes_naming(INGRESS_REPLICA, among=service.descendants())
    victim = replicas[0]
    loop = asyncio.get_running_loop()
    stopped_at = loop.time()
    victim.suspend()
    try:
        await until(lambda: not running(victim.pid), "Serve killed the stopped replica", timeout_s=40)
    finally:
        with contextlib.suppress(psutil.Error):
            victim.resume()  # not killed: given back, so that the module's service stops cleanly
    print(f"the stopped replica was killed {loop.time() - stopped_at:.1f} s after SIGSTOP")
    # Serve may have started the replacement already: only the stopped replica's listener is known gone.
    await until(lambda: victim.pid not in listeners(port, service.descendants()), "its listener closed")
    for _ in range(20):  # each on a connection of its own, so each is the kernel's choice again
        assert await health(port, STOP_SOURCE) == b"HTTP/1.1 200 OK"
    await until(lambda: replaced(service, victim), "Serve's replacement listening on the port", timeout_s=180)
    for _ in range(20):
        assert await health(port, STOP_SOURCE) == b"HTTP/1.1 200 OK"


def replaced(service: RunningService, victim: psutil.Process) -> bool:
    """Whether the service runs its replicas again, ``victim`` not among them, each listening on the port."""
    now = {p.pid for p in processes_naming(INGRESS_REPLICA, among=service.descendants())}
    port = int(service.env["GATEWAY_PORT"])
    return len(now) == REPLICAS and victim.pid not in now and listeners(port, service.descendants()) == now


async def health(port: int, source: str) -> bytes:
    """``GET /health`` on a new connection from ``source``: the answer's status line. Read to the end (the
    replica closes it: ``Connection: close``), so that the connection no longer counts against the source's cap
    when the next opens."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port, local_addr=(source, 0))
    try:
        writer.write(b"GET /health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        answer = await asyncio.wait_for(reader.read(), 10)
        return answer.split(b"\r\n", 1)[0]
    finally:
        writer.close()


async def until(done: Callable[[], bool], what: str, *, timeout_s: float = 30) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout_s
    while not done():
        assert loop.time() < deadline, f"not within {timeout_s:g} s: {what}"
        await asyncio.sleep(0.2)

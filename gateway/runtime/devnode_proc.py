"""The devnode as a child process of ``gateway up`` (it stands for a separate node, so it runs apart): the
chain's leader, or a follower of it (``follow``: another node of the same chain, ``lag_slots`` behind it).

A port of 0 is chosen by the devnode: it writes the URLs it listens on to a ready file once listening
(and, for a follower, synced), which :meth:`DevnodeProcess.start` reads; a restart then keeps them."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Sequence
from pathlib import Path
from urllib.parse import urlsplit

import orjson
import psutil

from gateway.core.upstreams import UpstreamNode
from gateway.runtime.leftovers import left_behind, record, stop_processes


def rpc_ready(url: str, timeout_s: float = 1.0) -> bool:
    body = orjson.dumps({"jsonrpc": "2.0", "id": 1, "method": "getHealth"})
    request = urllib.request.Request(url, data=body, headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=timeout_s) as resp:
            return bool(orjson.loads(resp.read()).get("result") == "ok")
    except (OSError, urllib.error.URLError, ValueError):
        return False


PIDFILE = "devnode.pid"
#: Under the data dir: the embedded chain's followers' data dirs (``gateway up --nodes N``), node-1 to node-N,
#: and the pool they make (:data:`POOL_FILE`), which the operator's commands read.
FOLLOWERS = "followers"
POOL_FILE = "pool.json"


def record_followers(home: Path, nodes: Sequence[UpstreamNode]) -> None:
    """Write the pool of followers ``gateway up`` started (their ports are free ones, chosen at start)."""
    path = home / FOLLOWERS / POOL_FILE
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(orjson.dumps([n.model_dump(mode="json") for n in nodes]))


def recorded_followers(home: Path) -> list[UpstreamNode] | None:
    """The pool of followers the running ``gateway up`` of ``home`` started, if any."""
    try:
        return [UpstreamNode.model_validate(n) for n in orjson.loads((home / FOLLOWERS / POOL_FILE).read_bytes())]
    except (OSError, orjson.JSONDecodeError):
        return None


#: The URLs the devnode listens on, written by it once it serves (removed when it stops).
READY_FILE = "ready.json"


def stop_stale(data_dir: Path, timeout_s: float = 20.0) -> bool:
    """Stop the devnode a ``gateway up`` killed with SIGKILL left behind (:mod:`gateway.runtime.leftovers`).

    Its pid must still be a devnode of this data dir (its command line says so), so a reused pid is
    left alone. SIGTERM lets it persist its accounts, as ``stop`` does. True if one was stopped.
    """
    what = left_behind(data_dir / PIDFILE)
    if what is None or not what.isdigit():
        return False
    try:
        node = psutil.Process(int(what))
        argv = node.cmdline()
    except psutil.Error:
        return False
    if "devnode" not in argv or str(data_dir) not in argv:
        return False
    return stop_processes([node], timeout_s) > 0


class DevnodeProcess:
    def __init__(
        self,
        data_dir: Path,
        rpc_port: int,
        ws_port: int,
        slot_ms: int,
        retention_slots: int,
        feed: bool,
        grpc_port: int | None = None,
        follow: str | None = None,
        lag_slots: int = 0,
    ) -> None:
        self.data_dir = data_dir
        self.rpc_port = rpc_port
        self.ws_port = ws_port
        self.grpc_port = grpc_port  # the geyser gRPC server's; None: none
        self.slot_ms, self.retention_slots, self.feed = slot_ms, retention_slots, feed
        self.follow, self.lag_slots = follow, lag_slots
        self.extra_args: list[str] = []  # more of the devnode's own options
        self._proc: subprocess.Popen[bytes] | None = None

    @property
    def args(self) -> list[str]:
        following = [] if self.follow is None else ["--follow", self.follow, "--lag-slots", str(self.lag_slots)]
        return [
            sys.executable,
            "-m",
            "devnode",
            "--data-dir",
            str(self.data_dir),
            "--rpc-port",
            str(self.rpc_port),
            "--ws-port",
            str(self.ws_port),
            "--slot-ms",
            str(self.slot_ms),
            "--retention-slots",
            str(self.retention_slots),
            "--feed" if self.feed and self.follow is None else "--no-feed",
            *(["--no-geyser"] if self.grpc_port is None else ["--grpc-port", str(self.grpc_port)]),
            *following,
            "--ready-file",
            str(self.ready_file),
            *self.extra_args,
        ]

    @property
    def ready_file(self) -> Path:
        return self.data_dir / READY_FILE

    @property
    def rpc_url(self) -> str:
        return f"http://127.0.0.1:{self.rpc_port}"

    @property
    def ws_url(self) -> str:
        return f"ws://127.0.0.1:{self.ws_port}"

    @property
    def pid(self) -> int | None:
        return None if self._proc is None else self._proc.pid

    @property
    def grpc_url(self) -> str | None:
        return None if self.grpc_port is None else f"http://127.0.0.1:{self.grpc_port}"

    def start(self, timeout_s: float = 60.0) -> None:
        """Start it and wait until it serves: its ready file written (a follower: once synced), and a leader
        answering ``getHealth``. A port of 0 is then the one it chose, kept for a restart."""
        self.data_dir.mkdir(parents=True, exist_ok=True)
        self.ready_file.unlink(missing_ok=True)  # a killed devnode's: it never removed it
        log = (self.data_dir / "devnode.log").open("ab")
        # A session of its own, so a terminal's Ctrl-C reaches `gateway up` alone, which stops the devnode
        # after the replicas that use it (as embedded Redis; docs in gateway/runtime/embedded.py).
        self._proc = subprocess.Popen(
            self.args, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
        )
        record(self.data_dir / PIDFILE, str(self._proc.pid))
        deadline = time.monotonic() + timeout_s
        while not self._serving():
            if self._proc.poll() is not None:
                raise RuntimeError(f"devnode exited with {self._proc.returncode}; see {self.data_dir / 'devnode.log'}")
            if time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(f"devnode did not answer within {timeout_s:g} s")
            time.sleep(0.1)

    def _serving(self) -> bool:
        try:
            urls = orjson.loads(self.ready_file.read_bytes())
        except (OSError, orjson.JSONDecodeError):
            return False
        self.rpc_port = urlsplit(urls["rpc_url"]).port or self.rpc_port
        self.ws_port = urlsplit(urls["ws_url"]).port or self.ws_port
        if self.grpc_port is not None and urls.get("grpc_url"):
            self.grpc_port = urlsplit(urls["grpc_url"]).port or self.grpc_port
        return self.follow is not None or rpc_ready(self.rpc_url)

    def signal(self, signum: int) -> None:
        """Send ``signum`` to the process (a fault: SIGSTOP hangs it, SIGCONT resumes it, SIGKILL kills it)."""
        assert self._proc is not None
        self._proc.send_signal(signum)
        if signum == signal.SIGKILL:
            self._proc.wait()
            self._proc = None

    def stop(self) -> None:
        """SIGTERM lets the devnode persist its accounts before it exits."""
        if self._proc is None:
            return
        self._proc.terminate()
        self._proc.send_signal(signal.SIGCONT)  # a stopped (hung) one handles the SIGTERM only once resumed
        try:
            self._proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self._proc.kill()
            self._proc.wait()
        (self.data_dir / PIDFILE).unlink(missing_ok=True)
        self._proc = None

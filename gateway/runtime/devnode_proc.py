"""The devnode as a child process of ``gateway up`` (it stands for a separate node, so it runs apart)."""

from __future__ import annotations

import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import orjson
import psutil

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
    ) -> None:
        self.data_dir = data_dir
        self.rpc_port = rpc_port
        self.ws_port = ws_port
        self.grpc_port = grpc_port  # the geyser gRPC server's; None: none
        self.args = [
            sys.executable,
            "-m",
            "devnode",
            "--data-dir",
            str(data_dir),
            "--rpc-port",
            str(rpc_port),
            "--ws-port",
            str(ws_port),
            "--slot-ms",
            str(slot_ms),
            "--retention-slots",
            str(retention_slots),
            "--feed" if feed else "--no-feed",
            *(["--no-geyser"] if grpc_port is None else ["--grpc-port", str(grpc_port)]),
        ]
        self._proc: subprocess.Popen[bytes] | None = None

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
        self.data_dir.mkdir(parents=True, exist_ok=True)
        log = (self.data_dir / "devnode.log").open("ab")
        # A session of its own, so a terminal's Ctrl-C reaches `gateway up` alone, which stops the devnode
        # after the replicas that use it (as embedded Redis; docs in gateway/runtime/embedded.py).
        self._proc = subprocess.Popen(
            self.args, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
        )
        record(self.data_dir / PIDFILE, str(self._proc.pid))
        deadline = time.monotonic() + timeout_s
        while not rpc_ready(self.rpc_url):
            if self._proc.poll() is not None:
                raise RuntimeError(f"devnode exited with {self._proc.returncode}; see {self.data_dir / 'devnode.log'}")
            if time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(f"devnode did not answer within {timeout_s:g} s")
            time.sleep(0.1)

    def stop(self) -> None:
        """SIGTERM lets the devnode persist its accounts before it exits."""
        if self._proc is None:
            return
        self._proc.terminate()
        try:
            self._proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self._proc.kill()
            self._proc.wait()
        (self.data_dir / PIDFILE).unlink(missing_ok=True)
        self._proc = None

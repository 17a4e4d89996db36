"""Process lookup by command line, which the stop path uses for HAProxy and bench.metered for replicas."""

from __future__ import annotations

import os
import secrets
import subprocess
import sys
import time

import psutil

from gateway.config import Settings
from gateway.runtime.serve_runtime import ingress_env, processes_naming, stop_processes_naming


def test_processes_naming_finds_and_stops_a_process_by_its_command_line() -> None:
    marker = f"gateway-marker-{secrets.token_hex(4)}"
    assert processes_naming(marker) == []
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)", marker])
    try:
        deadline = time.monotonic() + 10
        while not processes_naming(marker) and time.monotonic() < deadline:  # until the child has exec'd
            time.sleep(0.01)
        assert [p.pid for p in processes_naming(marker)] == [proc.pid]
        stop_processes_naming(marker)
        assert proc.wait(timeout=10) is not None
        assert processes_naming(marker) == []
    finally:
        proc.kill()
        proc.wait()


def test_a_zombie_and_a_process_outside_among_are_no_match() -> None:
    marker = f"gateway-marker-{secrets.token_hex(4)}"
    exited = subprocess.Popen([sys.executable, "-c", "pass", marker])  # not waited for: a zombie once it exits
    running = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)", marker])
    try:
        deadline = time.monotonic() + 10
        while psutil.Process(exited.pid).status() != psutil.STATUS_ZOMBIE and time.monotonic() < deadline:
            time.sleep(0.01)
        while not processes_naming(marker) and time.monotonic() < deadline:  # until the sleeper has exec'd
            time.sleep(0.01)
        assert [p.pid for p in processes_naming(marker)] == [running.pid]
        assert processes_naming(marker, among=[psutil.Process(exited.pid)]) == []
        assert processes_naming(marker, among=[psutil.Process(os.getpid())]) == []
    finally:
        for proc in (exited, running):
            proc.kill()
            proc.wait()


def test_ray_http_servers_never_believe_forwarded_addresses_themselves() -> None:
    """uvicorn's default trusts X-Forwarded-For from loopback, which behind HAProxy is every request:
    the gateway's trusted_proxies decides instead."""
    env = ingress_env(Settings(), "/tmp/haproxy-files")
    assert env["FORWARDED_ALLOW_IPS"] == ""

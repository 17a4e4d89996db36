"""Process lookup by command line, which the stop path uses for HAProxy and bench.metered for replicas."""

from __future__ import annotations

import os
import secrets
import socket
import subprocess
import sys
import time

import psutil
import pytest

from gateway.app.settings import Settings
from gateway.runtime.ports import free_port
from gateway.runtime.serve_runtime import (
    ServeRuntime,
    cluster_host_warning,
    ingress_env,
    processes_naming,
    ray_address_unreachable,
    stop_processes_naming,
)


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


def test_rays_workers_run_at_nice_0_unless_the_operator_chose_a_niceness(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("RAY_worker_niceness", raising=False)
    assert ingress_env(Settings(), "/tmp/haproxy-files")["RAY_worker_niceness"] == "0"
    monkeypatch.setenv("RAY_worker_niceness", "15")
    assert ingress_env(Settings(), "/tmp/haproxy-files")["RAY_worker_niceness"] == "15"


def test_a_cluster_address_nothing_answers_at_is_unreachable() -> None:
    dead = f"127.0.0.1:{free_port()}"
    assert ray_address_unreachable(dead, timeout_s=2) is not None and dead in str(ray_address_unreachable(dead))
    assert ray_address_unreachable(f"ray://{dead}", timeout_s=2) is not None
    assert ray_address_unreachable("auto") is None and ray_address_unreachable("local") is None
    with socket.create_server(("127.0.0.1", 0)) as server:
        assert ray_address_unreachable(f"127.0.0.1:{server.getsockname()[1]}") is None


def test_joining_a_cluster_that_is_gone_fails_at_once_naming_ray() -> None:
    """Ray itself would wait for the address forever ("Failed to connect to GCS at address ...")."""
    dead = f"127.0.0.1:{free_port()}"
    runtime = ServeRuntime(Settings(ray_address=dead))
    before = dict(os.environ)
    started = time.monotonic()
    with pytest.raises(RuntimeError, match=r"^Ray: cannot join the cluster") as info:
        runtime.start_ray()
    assert time.monotonic() - started < 10
    assert dead in str(info.value) and "RAY_ADDRESS" in str(info.value)
    assert dict(os.environ) == before  # refused before anything was set up for Ray
    runtime.stop()


def test_the_ingress_is_deployed_fixed_or_autoscaled() -> None:
    from gateway.runtime.ingress import scaling_options

    assert scaling_options(Settings(ingress_replicas=3)) == {"num_replicas": 3}
    autoscaled = scaling_options(Settings(ingress_autoscaling={"max_replicas": 4, "upscale_delay_s": 1}))
    assert set(autoscaled) == {"autoscaling_config"}
    config = autoscaled["autoscaling_config"]
    assert (config["min_replicas"], config["max_replicas"], config["upscale_delay_s"]) == (1, 4, 1)
    from ray.serve.config import AutoscalingConfig

    AutoscalingConfig(**config)  # Serve takes every field as given


def test_a_loopback_host_is_named_on_a_cluster_behind_haproxy_only() -> None:
    """Each node's HAProxy and replicas listen on ``host``: on loopback no node reaches another's replicas
    (tests/cluster/test_two_nodes.py serves two nodes with 0.0.0.0)."""
    for host in ("127.0.0.1", "::1", "localhost"):
        warning = cluster_host_warning(Settings(host=host), 2)
        assert warning is not None and "GATEWAY_HOST=0.0.0.0" in warning, host
    assert cluster_host_warning(Settings(host="127.0.0.1"), 1) is None  # one node: its HAProxy has every replica
    assert cluster_host_warning(Settings(host="0.0.0.0"), 3) is None
    assert cluster_host_warning(Settings(host="10.0.0.10"), 3) is None  # the operator's choice
    assert cluster_host_warning(Settings(host="127.0.0.1", ingress_mode="proxy"), 2) is None  # Serve's proxy
    on_port = cluster_host_warning(Settings(host="127.0.0.1", ingress_mode="reuseport"), 2)  # the replicas'
    assert on_port is not None and "no other machine reaches them" in on_port


def test_ray_noise_is_not_printed_and_the_rest_is(capsys: pytest.CaptureFixture[str]) -> None:
    """What the raylet's error messages and Ray's log lines reach the driver through (Ray's own printer)."""
    from ray._private import worker

    from gateway.runtime.serve_runtime import quiet_ray_noise

    before = worker.print_to_stdstream
    try:
        assert quiet_ray_noise(("graceful_shutdown failed",))
        message = "Task ServeController.graceful_shutdown failed. There are infinite retries remaining"
        worker.print_to_stdstream({"lines": [message, "a replica died"], "pid": "raylet", "is_err": False}, False)
    finally:
        worker.print_to_stdstream = before
    printed = capsys.readouterr().out
    assert "a replica died" in printed and "graceful_shutdown" not in printed, printed


def test_a_stop_step_is_given_up_on_once_the_cluster_stops_answering() -> None:
    """A SIGTERM to the whole process group stops the GCS while Serve's shutdown waits on it: waiting out
    the step's whole bound (10 s) would only delay the stop."""
    from actors.cluster import bounded

    answers = iter([True, False])
    began = time.monotonic()
    bounded(lambda: time.sleep(5), 10.0, "a step waiting on a dead cluster", alive=lambda: next(answers, False))
    assert time.monotonic() - began < 3

"""The embedded default exposes nothing but loopback: every TCP listener of every process ``gateway up``
started (Ray's GCS, raylet, agents, workers and replicas, HAProxy with its stats and Prometheus front
ends, the gRPC stream, the devnode, Redis and PostgreSQL) is on a loopback address."""

from __future__ import annotations

import stat
import time
import urllib.request

import pytest

from gateway.runtime.exposure import listeners, names, stack_processes
from tests.integration.service import RunningService

pytestmark = pytest.mark.integration


def test_every_listener_of_the_stack_is_on_loopback(service: RunningService) -> None:
    import psutil

    processes = stack_processes(service.home, psutil.Process(service.process.pid))
    running = names(processes)
    assert {"gcs_server", "raylet"} <= running, running  # Ray's processes were found, not only gateway up
    found = listeners(processes)
    print("\n".join(str(item) for item in found))
    ports = {item.port for item in found}
    haproxy = {item.port for item in found if item.process == "haproxy"}
    assert len(haproxy) >= 3, found  # the gateway's port, the stats page, the Prometheus front end
    assert int(service.env["GATEWAY_PORT"]) in ports and int(service.env["GATEWAY_METRICS_EXPORT_PORT"]) in ports
    exposed = [str(item) for item in found if not item.loopback]
    assert not exposed, f"listening beyond loopback: {exposed}"


def test_metrics_on_the_configured_loopback_port(service: RunningService) -> None:
    """The port `gateway up` prints serves the gateway's metrics, counters that never moved included (at 0)."""
    url = f"http://127.0.0.1:{service.env['GATEWAY_METRICS_EXPORT_PORT']}/metrics"
    wanted = ("ray_gateway_credit_settle_failures_total{", "ray_gateway_webhook_deliveries_total{", 'outcome="lost"')
    deadline = time.monotonic() + 90  # each process reports to Ray's agent every 10 s
    while True:
        with urllib.request.urlopen(url, timeout=10) as resp:
            assert resp.status == 200
            text = resp.read().decode()
        if all(part in text for part in wanted) or time.monotonic() > deadline:
            break
        time.sleep(2)
    missing = [part for part in wanted if part not in text]
    assert not missing, missing
    zero = [line for line in text.splitlines() if line.startswith("ray_gateway_credit_settle_failures_total{")]
    assert zero and all(line.endswith(" 0.0") or line.endswith(" 0") for line in zero), zero
    assert f"metrics http://127.0.0.1:{service.env['GATEWAY_METRICS_EXPORT_PORT']}/metrics" in service.log.read_text()


def test_secrets_are_private_files(service: RunningService) -> None:
    """The keys directory and the HMAC secret, the embedded Redis's files, PostgreSQL's data dir, Ray's token."""
    from gateway.runtime.private_files import ray_token_path

    home = service.home
    redis_files = [path for path in (home / "redis").rglob("*") if path.is_file()]
    assert redis_files, "Redis wrote no file"
    token = ray_token_path()
    assert token is not None
    modes = {str(path): stat.S_IMODE(path.stat().st_mode) for path in [*redis_files, token]}
    modes.update({str(path): stat.S_IMODE(path.stat().st_mode) for path in (home / "keys").iterdir()})
    dirs = {str(path): stat.S_IMODE(path.stat().st_mode) for path in (home / "keys", home / "redis", home / "postgres")}
    assert {path: oct(m) for path, m in modes.items() if m & 0o077} == {}
    assert {path: oct(m) for path, m in dirs.items() if m & 0o077} == {}

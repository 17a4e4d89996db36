"""Issue 9: ``gateway up`` starts its own local Ray whatever Ray's last-cluster file says, and a Ray it
cannot start or join fails the start with a message naming Ray instead of waiting forever.

``ray.init()`` without an address joins the cluster named in ``<ray temp dir>/ray_current_cluster``, the
file ``ray start`` leaves behind; after that cluster ended without ``ray stop`` it waited for the dead
address for ever ("Failed to connect to GCS at address ..."). Each test points Ray's temp dir
(``RAY_TMPDIR``) at a directory of its own, so the machine's real file is never touched: the package's
stack starts with such a file in its own (tests/integration/conftest.py), and the failed join has one too.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from gateway.runtime.ports import free_port
from tests.integration.service import RunningService, health, service_env, stale_ray_tmpdir

pytestmark = pytest.mark.integration


def test_a_stale_last_cluster_file_does_not_stop_the_local_ray(service: RunningService, ray_tmpdir: Path) -> None:
    assert health(service.url) == 200
    assert b"Failed to connect to GCS" not in service.log.read_bytes()
    assert any((ray_tmpdir / "ray").glob("session_*")), "the local Ray keeps its session in RAY_TMPDIR"


def test_a_cluster_to_join_that_is_gone_fails_the_start_naming_ray(tmp_path: Path) -> None:
    home = tmp_path / "home"
    dead = f"127.0.0.1:{free_port()}"
    ray_tmpdir = stale_ray_tmpdir()
    env = service_env(home, RAY_TMPDIR=str(ray_tmpdir), RAY_ADDRESS=dead)
    home.mkdir(parents=True)
    started = time.monotonic()
    try:
        done = subprocess.run(
            [str(Path(sys.executable).with_name("gateway")), "up"],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            timeout=120,
            check=False,
        )
    finally:
        shutil.rmtree(ray_tmpdir, ignore_errors=True)
    out = done.stdout.decode(errors="replace")
    assert done.returncode == 1, out
    assert "start-up failed" in out and "Ray: cannot join" in out and dead in out, out
    assert "RAY_ADDRESS" in out, out
    assert time.monotonic() - started < 100, out

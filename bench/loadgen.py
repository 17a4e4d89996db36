"""Closed-loop HTTP load generator for loopback targets: aiohttp always, wrk when installed.

`run_load` keeps `connections` requests in flight (one keep-alive connection per worker, one
shared `aiohttp.ClientSession`, the body encoded once), discards the first `warmup_s` seconds,
then measures for `duration_s` seconds or `max_requests` requests, whichever ends first.
Headers are a dict or a zero-argument callable called once per request (to sign each request).
Only loopback URLs are accepted.

With `rate` (requests a second, Python client only) the loop is paced: worker `i` of `n` sends its
`k`-th request no earlier than `(k * n + i) / rate` seconds after the start, at once when it is behind,
so the run never sends faster than `rate` and two targets that both keep up serve the same load: their
CPU per request compares the same work at the same rate, without a slower target's lower saturated rate
changing what each request costs (bench/README.md, "eight rounds, the same rate, and wrk"). A target
that cannot keep up is loaded closed-loop as without it, and reports fewer than `rate` a second.

The Python client's ceiling (measured 2026-11-22 on the 2-core project machine, client and
server sharing the two cores). Against `bench.const_upstream` (one uvicorn process, raw ASGI):

    client                    64 conn req/s  p50 ms   1 conn req/s  p50 ms   client CPU ms/req
    aiohttp (this module)          ~13,800     4.6          ~3,700    0.27     0.07 / 0.18
    wrk, 1-2 threads               ~33,700     1.8         ~10,700    0.09     0.015 / 0.03

So the Python client tops out near 14k req/s (64 conn) and 3.7k req/s (1 conn), where it burns
about one core itself. Consequences:
  * a target near those figures is client-bound: the const upstream measured with the Python
    client reads ~2.5x too slow; use `backend="wrk"` for it, or read only ratios;
  * the plain forwarder (~6-8k req/s) and Ray Serve targets (~1-6k req/s) are below the ceiling,
    but the client's CPU is still taken from the server: absolute figures are lower than wrk's
    and ratios between targets are what to compare (measure them in the same run);
  * at 1 connection the client's own ~0.2 ms per request is part of every latency figure.
`LoadResult.client_cpu_ms_per_req` reports the client's CPU cost per request.

`backend="wrk"` runs `wrk` (Debian package `wrk`) with a generated Lua script: same closed loop,
a per-thread request cap (`wrk.thread:stop()`), per-status error counts, latency percentiles from
wrk's histogram. It needs static headers. wrk cannot end early: when the cap stops its threads it
still waits out the duration, so its req/s is only meaningful when the cap was not reached.
`backend="auto"` uses wrk when it is on PATH and the headers are static, else the Python client.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import math
import os
import resource
import shutil
import tempfile
import time
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, field
from typing import Final

import aiohttp

from bench._proc import require_loopback_url

Headers = Mapping[str, str] | Callable[[], Mapping[str, str]]

DEFAULT_BODY: Final = b'{"jsonrpc":"2.0","id":1,"method":"getSlot"}'
DEFAULT_HEADERS: Final[Mapping[str, str]] = {"Content-Type": "application/json"}
BACKENDS: Final = ("python", "wrk", "auto")
_REQUEST_TIMEOUT_S: Final = 10.0
_ERROR_BACKOFF_S: Final = 0.01


@dataclass
class LoadResult:
    """What one load run measured (the warm-up excluded)."""

    url: str
    connections: int
    backend: str
    count: int  # successful (2xx) responses in the measured window
    duration_s: float  # the measured window
    rps: float  # count / duration_s
    p50_ms: float
    p99_ms: float
    max_ms: float
    errors: dict[str, int] = field(default_factory=dict)  # by HTTP status or exception name
    client_cpu_s: float = 0.0  # CPU used by the client over the measured window (wrk: whole run)
    client_cpu_ms_per_req: float = 0.0
    server_cpu_ms_per_req: float | None = None  # filled in by callers that know the server's pids
    node_cpu_us_per_req: dict[str, float] | None = None  # by process role (bench/node_cpu.py), when asked

    @property
    def error_count(self) -> int:
        return sum(self.errors.values())

    def to_dict(self) -> dict[str, object]:
        return asdict(self)


def percentile(sorted_values: list[float], pct: float) -> float:
    """Nearest-rank percentile of an ascending list (0.0 when empty)."""
    if not sorted_values:
        return 0.0
    rank = max(1, math.ceil(pct / 100.0 * len(sorted_values)))
    return sorted_values[min(rank, len(sorted_values)) - 1]


def wrk_available() -> bool:
    return shutil.which("wrk") is not None


async def run_load(
    url: str,
    body: bytes = DEFAULT_BODY,
    headers: Headers = DEFAULT_HEADERS,
    connections: int = 64,
    duration_s: float = 8.0,
    max_requests: int = 1_000_000,
    warmup_s: float = 1.0,
    *,
    backend: str = "python",
    method: str = "POST",
    rate: float | None = None,
) -> LoadResult:
    """Drive `url` with `connections` concurrent closed-loop clients and measure it; with `rate`, paced to
    at most that many requests a second (the Python client: wrk has no pacing).

    Bounded in time (`warmup_s + duration_s`, plus at most one request timeout of 10 s) and in
    count (at most `max_requests` measured requests and `max_requests` warm-up requests).
    """
    require_loopback_url(url)
    if connections < 1:
        raise ValueError("connections must be >= 1")
    if duration_s <= 0 or warmup_s < 0 or max_requests < 1:
        raise ValueError("duration_s must be > 0, warmup_s >= 0 and max_requests >= 1")
    if backend not in BACKENDS:
        raise ValueError(f"unknown backend {backend!r}; choose from {BACKENDS}")
    if rate is not None and not (math.isfinite(rate) and rate > 0):
        raise ValueError("rate must be a positive number of requests a second")
    if backend == "auto":
        backend = "wrk" if wrk_available() and not callable(headers) and rate is None else "python"
    if backend == "wrk":
        if callable(headers):
            raise ValueError("the wrk backend needs static headers; use backend='python' to sign per request")
        if rate is not None:
            raise ValueError("the wrk backend is not paced; use backend='python' with a rate")
        return await _run_wrk(url, body, headers, connections, duration_s, max_requests, warmup_s, method)
    return await _run_python(url, body, headers, connections, duration_s, max_requests, warmup_s, method, rate)


# ------------------------------------------------------------------------------------ aiohttp client


async def _run_python(
    url: str,
    body: bytes,
    headers: Headers,
    connections: int,
    duration_s: float,
    max_requests: int,
    warmup_s: float,
    method: str,
    rate: float | None = None,
) -> LoadResult:
    connector = aiohttp.TCPConnector(limit=connections, limit_per_host=connections, ttl_dns_cache=None)
    latencies: list[float] = []
    errors: dict[str, int] = {}
    perf = time.perf_counter
    started = perf()
    measure_from = started + warmup_s
    deadline = measure_from + duration_s
    warmup_left = max_requests if warmup_s > 0 else 0
    measured_left = max_requests
    state = {"cpu_start": 0.0, "measure_start": measure_from, "last_end": measure_from}
    cpu_marked = False
    static_headers = None if callable(headers) else dict(headers)
    header_factory = headers if callable(headers) else None

    def mark_measure_start() -> None:
        nonlocal cpu_marked
        if not cpu_marked:
            cpu_marked = True
            state["cpu_start"] = time.process_time()
            state["measure_start"] = perf()

    async def worker(session: aiohttp.ClientSession, index: int) -> None:
        nonlocal warmup_left, measured_left
        sent = 0  # this worker's requests so far: its next one is due at (sent * connections + index) / rate
        while True:
            if rate is not None:
                due = started + (sent * connections + index) / rate
                sent += 1
                if due > perf():
                    await asyncio.sleep(due - perf())
            t0 = perf()
            if t0 >= deadline:
                return
            measuring = t0 >= measure_from
            if measuring:
                if measured_left <= 0:
                    return
                measured_left -= 1
                mark_measure_start()
            else:
                if warmup_left <= 0:  # warm-up cap reached: wait for the measured window
                    await asyncio.sleep(min(0.05, measure_from - t0))
                    continue
                warmup_left -= 1
            request_headers = header_factory() if header_factory is not None else static_headers
            failure: str | None = None
            try:
                async with session.request(method, url, data=body, headers=request_headers) as resp:
                    await resp.read()
                    status = resp.status
                if status >= 400 or status < 200:
                    failure = str(status)
            except (aiohttp.ClientError, TimeoutError, OSError) as exc:
                failure = type(exc).__name__
            t1 = perf()
            if measuring:
                state["last_end"] = max(state["last_end"], t1)
                if failure is None:
                    latencies.append(t1 - t0)
                else:
                    errors[failure] = errors.get(failure, 0) + 1
            if failure is not None and not failure.isdigit():
                await asyncio.sleep(_ERROR_BACKOFF_S)

    async with aiohttp.ClientSession(
        connector=connector,
        timeout=aiohttp.ClientTimeout(total=_REQUEST_TIMEOUT_S),
        auto_decompress=False,
        skip_auto_headers=("User-Agent", "Accept-Encoding"),
    ) as session:
        await asyncio.gather(*(worker(session, index) for index in range(connections)))
        cpu_end = time.process_time()
    window = max(state["last_end"] - state["measure_start"], 1e-9)
    cpu = cpu_end - state["cpu_start"] if cpu_marked else 0.0
    latencies.sort()
    count = len(latencies)
    return LoadResult(
        url=url,
        connections=connections,
        backend="python",
        count=count,
        duration_s=window,
        rps=count / window,
        p50_ms=percentile(latencies, 50) * 1e3,
        p99_ms=percentile(latencies, 99) * 1e3,
        max_ms=(latencies[-1] * 1e3) if latencies else 0.0,
        errors=errors,
        client_cpu_s=cpu,
        client_cpu_ms_per_req=(cpu / count * 1e3) if count else 0.0,
    )


# ------------------------------------------------------------------------------------------- wrk

_WRK_SCRIPT: Final = """
wrk.method = "{method}"
wrk.body = "{body}"
{headers}
local max_per_thread = {max_per_thread}
local threads = {{}}
function setup(thread)
  table.insert(threads, thread)
end
function init(args)
  responses = 0
  statuses = {{}}
end
function response(status, headers, body)
  responses = responses + 1
  if status < 200 or status >= 400 then
    local key = tostring(status)
    statuses[key] = (statuses[key] or 0) + 1
  end
  if responses >= max_per_thread then
    wrk.thread:stop()
  end
end
function done(summary, latency, requests)
  local bad = {{}}
  for _, t in ipairs(threads) do
    local s = t:get("statuses")
    for k, v in pairs(s) do
      bad[k] = (bad[k] or 0) + v
    end
  end
  local parts = {{}}
  for k, v in pairs(bad) do
    table.insert(parts, string.format('"%s":%d', k, v))
  end
  local e = summary.errors
  io.write(string.format(
    'WRKJSON {{"requests":%d,"duration_us":%d,"p50_us":%d,"p99_us":%d,"max_us":%d,' ..
    '"connect":%d,"read":%d,"write":%d,"timeout":%d,"status":{{%s}}}}\\n',
    summary.requests, summary.duration, latency:percentile(50), latency:percentile(99), latency.max,
    e.connect, e.read, e.write, e.timeout, table.concat(parts, ",")))
end
"""


def _lua_string(data: bytes) -> str:
    return "".join(f"\\{b}" for b in data)


def _wrk_script(method: str, body: bytes, headers: Mapping[str, str], max_per_thread: int) -> str:
    header_lines = "\n".join(
        f'wrk.headers["{_lua_string(k.encode())}"] = "{_lua_string(v.encode())}"' for k, v in headers.items()
    )
    return _WRK_SCRIPT.format(
        method=_lua_string(method.encode()),
        body=_lua_string(body),
        headers=header_lines,
        max_per_thread=max_per_thread,
    )


async def _wrk_once(
    url: str, script_path: str, connections: int, threads: int, duration_s: float
) -> tuple[dict[str, object], float]:
    seconds = max(1, math.ceil(duration_s))
    usage_before = resource.getrusage(resource.RUSAGE_CHILDREN)
    proc = await asyncio.create_subprocess_exec(
        "wrk",
        f"-t{threads}",
        f"-c{connections}",
        f"-d{seconds}s",
        f"--timeout={int(_REQUEST_TIMEOUT_S)}s",
        "-s",
        script_path,
        url,
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    try:
        stdout, stderr = await asyncio.wait_for(proc.communicate(), seconds + _REQUEST_TIMEOUT_S + 10)
    except TimeoutError:
        with contextlib.suppress(ProcessLookupError):
            proc.kill()
        await proc.wait()
        raise
    usage_after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (usage_after.ru_utime - usage_before.ru_utime) + (usage_after.ru_stime - usage_before.ru_stime)
    for line in stdout.decode(errors="replace").splitlines():
        if line.startswith("WRKJSON "):
            parsed: dict[str, object] = json.loads(line[len("WRKJSON ") :])
            return parsed, cpu
    raise RuntimeError(f"wrk printed no summary (exit {proc.returncode}): {stderr.decode(errors='replace')[-500:]}")


async def _run_wrk(
    url: str,
    body: bytes,
    headers: Mapping[str, str],
    connections: int,
    duration_s: float,
    max_requests: int,
    warmup_s: float,
    method: str,
) -> LoadResult:
    threads = max(1, min(2, connections, os.cpu_count() or 1))
    per_thread = max(1, math.ceil(max_requests / threads))
    fd, script_path = tempfile.mkstemp(prefix="bench-wrk-", suffix=".lua")
    try:
        with os.fdopen(fd, "w") as handle:
            handle.write(_wrk_script(method, body, headers, per_thread))
        if warmup_s > 0:
            await _wrk_once(url, script_path, connections, threads, warmup_s)
        summary, cpu = await _wrk_once(url, script_path, connections, threads, duration_s)
    finally:
        os.unlink(script_path)
    errors: dict[str, int] = {}
    raw_status = summary.get("status")
    if isinstance(raw_status, dict):
        errors.update({str(k): int(v) for k, v in raw_status.items()})
    for kind in ("connect", "read", "write", "timeout"):
        value = _as_int(summary.get(kind))
        if value:
            errors[f"wrk_{kind}"] = value
    total = _as_int(summary.get("requests"))
    bad_status = sum(v for k, v in errors.items() if k.isdigit())
    count = max(0, total - bad_status)
    window = max(_as_int(summary.get("duration_us")) / 1e6, 1e-9)
    return LoadResult(
        url=url,
        connections=connections,
        backend="wrk",
        count=count,
        duration_s=window,
        rps=count / window,
        p50_ms=_as_int(summary.get("p50_us")) / 1e3,
        p99_ms=_as_int(summary.get("p99_us")) / 1e3,
        max_ms=_as_int(summary.get("max_us")) / 1e3,
        errors=errors,
        client_cpu_s=cpu,
        client_cpu_ms_per_req=(cpu / count * 1e3) if count else 0.0,
    )


def _as_int(value: object) -> int:
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, int | float):
        return int(value)
    return 0

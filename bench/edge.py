"""What Serve's HAProxy costs a request, and what the gateway's edge rules add to it.

    python -m bench.edge [--rounds 3] [--duration 6] [--connections 64]

The stack is started once, as ``gateway up`` starts it (bench.metered's way), only to take the HAProxy
configuration Ray writes for it; then it is stopped, and Ray's bundled HAProxy runs alone in front of the
constant upstream (``bench/const_upstream.py``) with, in turn:

- ``ray``: Ray's configuration as written (its template: the access log of every request, the ACLs, the
  health checks, connection reuse to the replicas);
- ``gateway``: the same as ``gateway-haproxy`` runs it (:mod:`gateway.runtime.haproxy_edge`: the client's
  address and the edge secret set on every request, the request buffered under its deadline, the
  per-source connection table, only abnormal requests logged);
- ``minimal``: a front end, a backend with connection reuse, nothing else: what any proxy hop costs here;

and the upstream alone. The replica's port in Ray's configuration points at the upstream, its HTTP health
check becomes a TCP one (the upstream answers only POST) and the admin ports and files are this run's own;
nothing else is changed. Rounds interleave the variants, every other round reversed; each prints its
throughput, p50 and HAProxy's CPU per request, the medians over the rounds close the run.
"""

from __future__ import annotations

import argparse
import asyncio
import shutil
import statistics
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import psutil

from bench.loadgen import BACKENDS, DEFAULT_BODY, DEFAULT_HEADERS, LoadResult, run_load
from bench.metered import haproxy_binary, start_reference, wait_answering
from gateway.base.keys import service_key_addresses
from gateway.runtime.haproxy_edge import EdgeLimits, edge_origins, gateway_config
from gateway.runtime.ports import free_port
from gateway.runtime.serve_runtime import HAPROXY_RECORD

VARIANTS = ("ray", "gateway", "minimal")
#: The gateway's body deadline as `gateway up` sets it by default (docs/configuration.md).
REQUEST_TIMEOUT_S = 10.0


def minimal_config(port: int, upstream_port: int) -> str:
    return f"""global
    maxconn 4096
    nbthread 1
defaults
    mode http
    timeout connect 5s
    timeout client 30s
    timeout server 30s
frontend http_frontend
    bind 127.0.0.1:{port}
    default_backend upstream
backend upstream
    http-reuse always
    server upstream 127.0.0.1:{upstream_port}
"""


def retarget(text: str, port: int, upstream_port: int, workdir: Path) -> str:
    """Ray's configuration with its front end on ``port``, its replica servers on the upstream, its admin
    socket, state and error files in ``workdir`` and its other listeners on free loopback ports."""
    out: list[str] = []
    section = ""
    for line in text.splitlines():
        stripped = line.strip()
        indent = line[: len(line) - len(line.lstrip())]
        if not line.startswith((" ", "\t")) and stripped:
            section = stripped
        words = stripped.split()
        if stripped.startswith("stats socket "):
            line = f"{indent}stats socket {workdir}/admin.sock mode 600 level admin"
        elif stripped.startswith("server-state-base "):
            line = f"{indent}server-state-base {workdir}"
        elif stripped.startswith("server-state-file "):
            line = f"{indent}server-state-file {workdir}/server-state"
        elif stripped.startswith("errorfile "):
            source = Path(words[2])
            copy = workdir / source.name
            if not copy.exists():
                shutil.copyfile(source, copy)
            line = f"{indent}errorfile {words[1]} {copy}"
        elif stripped.startswith("bind "):
            line = f"{indent}bind 127.0.0.1:{port if section == 'frontend http_frontend' else free_port()}"
        elif stripped.startswith(("option httpchk", "http-check ")):
            continue  # the upstream answers POST only: a TCP check instead
        elif stripped.startswith("server ") and section.startswith("backend "):
            if "backup" in words:
                continue  # Serve's fallback proxy: gone with the stack
            line = f"{indent}server replica 127.0.0.1:{upstream_port} check"
        out.append(line)
    return "\n".join(out) + "\n"


def rays_config(seconds: float = 60.0) -> tuple[str, Path]:
    """The HAProxy configuration Ray writes for the stack once its replica is in it, with a copy of the
    files it names (error answers), taken from a stack started and stopped here."""
    from gateway.app.settings import Settings
    from gateway.runtime.stack import Stack

    upstream_proc, upstream_url = start_reference("bench.const_upstream")
    home = Path(tempfile.mkdtemp(prefix="gw-bench-edge-"))
    settings = Settings(
        **service_key_addresses(home),
        home=home,
        port=free_port(),
        metrics_export_port=free_port(),  # another stack may hold the default one
        upstream_rpc_url=upstream_url,
    )
    stack = Stack(settings, report=lambda part, detail: None)
    kept = Path(tempfile.mkdtemp(prefix="gw-bench-edge-files-"))
    try:
        stack.start()
        files = Path((home / HAPROXY_RECORD).read_text().split("\n")[0])
        deadline = time.monotonic() + seconds
        while True:
            configs = [path for path in files.rglob("haproxy.cfg") if "check observe" in path.read_text()]
            if configs:
                break
            if time.monotonic() > deadline:
                raise RuntimeError(f"no replica in Ray's HAProxy configuration under {files}")
            time.sleep(0.5)
        text = configs[0].read_text()
        for path in configs[0].parent.glob("*.http"):
            shutil.copyfile(path, kept / path.name)
        return text.replace(str(configs[0].parent), str(kept)), kept
    finally:
        stack.stop()
        upstream_proc.terminate()
        upstream_proc.wait(timeout=10)
        shutil.rmtree(home, ignore_errors=True)


def variant_config(name: str, ray_text: str, port: int, upstream_port: int, workdir: Path) -> str:
    if name == "minimal":
        return minimal_config(port, upstream_port)
    text = ray_text
    if name == "gateway":  # what gateway-haproxy does to Ray's file (haproxy_edge.patched_args)
        path = workdir / "haproxy.cfg.gateway"
        text = gateway_config(text, path, "0" * 32, REQUEST_TIMEOUT_S, EdgeLimits(), edge_origins({}))
    return retarget(text, port, upstream_port, workdir)


@dataclass
class Figure:
    rps: float
    p50_ms: float
    haproxy_us: float | None  # HAProxy's CPU per request; None for the upstream alone


def load(url: str, connections: int, duration_s: float, client: str) -> LoadResult:
    return asyncio.run(
        run_load(url, DEFAULT_BODY, DEFAULT_HEADERS, connections, duration_s, warmup_s=1.0, backend=client)
    )


def measure(url: str, pid: int | None, connections: int, duration_s: float, client: str) -> Figure:
    process = psutil.Process(pid) if pid is not None else None
    before = sum(process.cpu_times()[:2]) if process is not None else 0.0
    result = load(url, connections, duration_s, client)
    # The warm-up's requests are in HAProxy's CPU too: counted with the measured ones at the measured rate.
    served = result.count * (duration_s + 1.0) / duration_s
    spent = sum(process.cpu_times()[:2]) - before if process is not None else 0.0
    return Figure(result.rps, result.p50_ms, spent / served * 1e6 if process is not None else None)


def run(rounds: int, duration_s: float, connections: int, client: str) -> dict[str, list[Figure]]:
    ray_text, files = rays_config()
    binary = haproxy_binary()  # the stack pointed Ray at gateway-haproxy: the real binary is wanted
    upstream_proc, upstream_url = start_reference("bench.const_upstream")
    upstream_port = int(upstream_url.rstrip("/").rpartition(":")[2])
    work = Path(tempfile.mkdtemp(prefix="gw-bench-edge-run-"))
    proxies: dict[str, tuple[subprocess.Popen[bytes], str]] = {}
    try:
        for name in VARIANTS:
            workdir = work / name
            workdir.mkdir()
            for path in files.glob("*.http"):
                shutil.copyfile(path, workdir / path.name)
            port = free_port()
            config = workdir / "haproxy.cfg"
            config.write_text(variant_config(name, ray_text, port, upstream_port, workdir))
            proc = subprocess.Popen([binary, "-db", "-f", str(config)], stdout=subprocess.DEVNULL)
            url = f"http://127.0.0.1:{port}/"
            wait_answering(url)
            proxies[name] = (proc, url)
        figures: dict[str, list[Figure]] = {name: [] for name in ("upstream", *VARIANTS)}
        targets = [("upstream", None, upstream_url), *((name, proc.pid, url) for name, (proc, url) in proxies.items())]
        for round_no in range(rounds):
            order = targets if round_no % 2 == 0 else targets[::-1]
            for name, pid, url in order:
                figure = measure(url, pid, connections, duration_s, client)
                figures[name].append(figure)
                cpu = f", HAProxy {figure.haproxy_us:.1f} µs CPU a request" if figure.haproxy_us is not None else ""
                print(f"round {round_no + 1} {name:<9} {figure.rps:>9,.0f} req/s  p50 {figure.p50_ms:.2f} ms{cpu}")
        return figures
    finally:
        for proc, _ in proxies.values():
            proc.terminate()
            proc.wait(timeout=10)
        upstream_proc.terminate()
        upstream_proc.wait(timeout=10)
        shutil.rmtree(work, ignore_errors=True)
        shutil.rmtree(files, ignore_errors=True)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.edge", description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--duration", type=float, default=6.0, help="measured seconds per run (default 6)")
    parser.add_argument("--connections", type=int, default=64)
    parser.add_argument("--client", choices=BACKENDS, default="auto")
    args = parser.parse_args(argv)
    figures = run(args.rounds, args.duration, args.connections, args.client)
    print(f"\nmedians of {args.rounds} rounds, {args.connections} connections:")
    upstream_rps = statistics.median(f.rps for f in figures["upstream"])
    for name, runs in figures.items():
        rps = statistics.median(f.rps for f in runs)
        cpu = [f.haproxy_us for f in runs if f.haproxy_us is not None]
        each = ", ".join(f"{c:.1f}" for c in cpu)
        line = f"{name:<9} {rps:>9,.0f} req/s ({rps / upstream_rps:.2f} of the upstream alone)"
        if cpu:
            line += f"; HAProxy {statistics.median(cpu):.1f} µs CPU a request ({each})"
        print(line)


if __name__ == "__main__":
    main()

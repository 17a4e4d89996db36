"""What the stack spends with no load: CPU a second of each process of a ``gateway up`` stack at rest.

    python -m bench.idle [--settle 20] [--seconds 30]

The stack is started as ``bench.metered`` starts it (``gateway up``'s: embedded PostgreSQL and Redis, a
local Ray, Serve behind HAProxy), pointed at the constant upstream; after ``--settle`` seconds (start-up
work done), each process's CPU is read from /proc before and after ``--seconds`` of no requests. Printed:
each role's ms of CPU a second (bench/node_cpu.py's roles), then each process over 0.5 ms/s. Ray's timers
(``gateway up``'s settings of them: gateway/runtime/serve_runtime.py) are what this measures; compare a
run of one revision with another's (bench/README.md, "Ray's timers at rest").
"""

from __future__ import annotations

import argparse
import os
import shutil
import tempfile
import time
from pathlib import Path

import psutil

from bench.metered import start_reference
from bench.node_cpu import RAY_ROLES, format_rest, role
from gateway.base.keys import service_key_addresses
from gateway.runtime.ports import free_port


def cpu_seconds() -> dict[int, tuple[str, float]]:
    """Each process's (label, CPU seconds so far)."""
    taken: dict[int, tuple[str, float]] = {}
    for process in psutil.process_iter(["name", "cmdline", "cpu_times"]):
        times = process.info.get("cpu_times")
        if times is None:
            continue
        command = " ".join(process.info.get("cmdline") or [])
        label = f"{role(process.info.get('name') or '', command)}: {(command or process.info.get('name') or '')[:70]}"
        taken[process.pid] = (label, times.user + times.system)
    return taken


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.idle", description=__doc__.splitlines()[0])
    parser.add_argument("--settle", type=float, default=20.0, help="seconds after the start before measuring")
    parser.add_argument("--seconds", type=float, default=30.0, help="measured seconds of no load (default 30)")
    args = parser.parse_args(argv)

    from gateway.app.settings import Settings
    from gateway.runtime.stack import Stack

    upstream_proc, upstream_url = start_reference("bench.const_upstream")
    home = Path(tempfile.mkdtemp(prefix="gw-idle-"))
    settings = Settings(**service_key_addresses(home), home=home, port=free_port(), upstream_rpc_url=upstream_url)
    stack = Stack(settings, report=lambda part, detail: print(f"  {part:<11} {detail}", flush=True))
    try:
        stack.start()
        time.sleep(args.settle)
        before = cpu_seconds()
        time.sleep(args.seconds)
        after = cpu_seconds()
        mine = {os.getpid(), upstream_proc.pid}
        per_process = {
            pid: (label, (cpu - before[pid][1]) * 1e3 / args.seconds)
            for pid, (label, cpu) in after.items()
            if pid in before and pid not in mine
        }
        roles: dict[str, float] = {}
        for label, ms in per_process.values():
            named = label.split(": ", 1)[0]
            roles[named] = roles.get(named, 0.0) + ms
        roles = dict(sorted(roles.items(), key=lambda kv: -kv[1]))
        print(f"at rest ({args.seconds:g} s after {args.settle:g} s): {format_rest(roles)}")
        ray = sum(roles.get(r, 0.0) for r in (*RAY_ROLES, "replica", "Ray metrics agent"))
        print(f"Ray's and Serve's processes, the metrics agent and the replicas: {ray:.1f} ms/s")
        for pid, (label, ms) in sorted(per_process.items(), key=lambda kv: -kv[1][1]):
            if ms >= 0.5:
                print(f"  {ms:6.1f} ms/s  {pid:>7}  {label}")
    finally:
        stack.stop()
        upstream_proc.terminate()
        upstream_proc.wait(timeout=10)
        shutil.rmtree(home, ignore_errors=True)


if __name__ == "__main__":
    main()

"""Process lookup by command line, which the stop path uses for HAProxy and bench.metered for replicas."""

from __future__ import annotations

import secrets
import subprocess
import sys
import time

from gateway.runtime.serve_runtime import processes_naming, stop_processes_naming


def test_processes_naming_finds_and_stops_a_process_by_its_command_line() -> None:
    marker = f"gateway-marker-{secrets.token_hex(4)}"
    assert processes_naming(marker) == []
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)", marker])
    try:
        deadline = time.monotonic() + 10
        while not processes_naming(marker) and time.monotonic() < deadline:  # until the child has exec'd
            time.sleep(0.01)
        assert [p.pid for p in processes_naming(marker)] == [proc.pid]
        stop_processes_naming(marker)
        assert proc.wait(timeout=10) is not None
        assert processes_naming(marker) == []
    finally:
        proc.kill()
        proc.wait()

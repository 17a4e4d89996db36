"""``gateway status`` against the running stack, run as an operator runs it: a separate process that
joins the stack's Ray cluster as a driver (with the authentication the cluster expects) and reads Serve's
application and every named actor."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from tests.integration.service import RunningService

GATEWAY = Path(sys.executable).with_name("gateway")


def test_status_sees_every_part_of_the_running_stack(service: RunningService) -> None:
    done = subprocess.run(
        [str(GATEWAY), "status", "--json"], env=service.env, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stdout + done.stderr
    parts = {part["name"]: part for part in json.loads(done.stdout)["parts"]}
    assert parts["Ray"]["state"] == "up", parts["Ray"]
    assert parts["Serve"]["state"] == "up" and parts["Serve"]["data"]["status"] == "RUNNING", parts["Serve"]
    actors = {name for name in parts if name.startswith("actor ")}
    expected = {"deposit-watcher", "send-reconciler", "signal-classifier", "webhook-watcher", "account-shard-0"}
    assert {f"actor {name}" for name in expected} <= actors, sorted(actors)
    assert all(parts[name]["state"] == "up" for name in actors), [parts[n] for n in actors]

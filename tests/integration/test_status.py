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


def test_status_shows_the_listening_addresses_and_the_metrics_port(service: RunningService) -> None:
    done = subprocess.run(
        [str(GATEWAY), "status", "--json"], env=service.env, capture_output=True, text=True, timeout=120
    )
    exposure = {part["name"]: part for part in json.loads(done.stdout)["parts"]}["exposure"]
    assert exposure["state"] == "up" and exposure["data"]["not_loopback"] == [], exposure
    listening = {(item["address"], item["port"]) for item in exposure["data"]["listeners"]}
    assert ("127.0.0.1", int(service.env["GATEWAY_PORT"])) in listening, listening
    assert len(listening) > 10, listening  # Ray's processes too, not only the gateway's port
    assert exposure["data"]["metrics"] == f"http://127.0.0.1:{service.env['GATEWAY_METRICS_EXPORT_PORT']}/metrics"
    wide = {**service.env, "COLUMNS": "400"}
    table = subprocess.run([str(GATEWAY), "status"], env=wide, capture_output=True, text=True, timeout=120)
    assert "loopback only" in table.stdout and "metrics http://127.0.0.1:" in table.stdout, table.stdout

"""What ``gateway up`` refuses on a routable host, and how listeners are judged (gateway/runtime/exposure.py)."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

from gateway.app.settings import Settings
from gateway.runtime.exposure import is_loopback, network_refusals, replica_refusal
from gateway.runtime.ports import free_port

GATEWAY = Path(sys.executable).with_name("gateway")


def test_loopback_addresses_as_the_kernel_reports_them() -> None:
    assert all(map(is_loopback, ["127.0.0.1", "127.0.0.5", "::1", "::ffff:127.0.0.1"]))
    assert not any(map(is_loopback, ["0.0.0.0", "::", "192.0.2.2", "::ffff:192.0.2.2", "*", ""]))


PUBLIC = "https://rpc.example.com"


def test_plaintext_grpc_on_a_routable_host_is_refused_unless_the_override_is_set() -> None:
    assert network_refusals(Settings(host="127.0.0.1")) == []
    [why] = network_refusals(Settings(host="0.0.0.0", public_url=PUBLIC))
    assert "plaintext" in why and "GATEWAY_GRPC_ALLOW_PLAINTEXT_ON_NETWORK" in why
    assert network_refusals(Settings(host="0.0.0.0", public_url=PUBLIC, grpc_allow_plaintext_on_network=True)) == []
    assert network_refusals(Settings(host="0.0.0.0", public_url=PUBLIC, grpc_servers=0)) == []


def test_a_routable_host_names_its_public_origin() -> None:
    """The owner's Sign-In With Solana names the domain browsers reach: on a routable host the address it
    listens on (0.0.0.0) names none, so it is set or the start is refused; on loopback it is the page's."""
    [why] = network_refusals(Settings(host="0.0.0.0", grpc_servers=0))
    assert "GATEWAY_PUBLIC_URL" in why
    assert network_refusals(Settings(host="0.0.0.0", grpc_servers=0, public_url=PUBLIC)) == []
    assert Settings(host="127.0.0.1", port=8000).public_address.origin == "http://127.0.0.1:8000"


def test_a_cluster_on_a_routable_host_needs_the_edge_secret() -> None:
    joined = Settings(host="0.0.0.0", grpc_servers=0, ray_address="10.0.0.10:6379", public_url=PUBLIC)
    [why] = network_refusals(joined)
    assert "GATEWAY_EDGE_SECRET" in why
    assert network_refusals(joined.model_copy(update={"edge_secret": "ab" * 16})) == []
    assert replica_refusal(joined, {}) is not None  # a node whose `ray start` lacked it
    assert replica_refusal(joined, {"GATEWAY_EDGE_SECRET": "ab" * 16}) is None
    assert replica_refusal(Settings(), {}) is None  # loopback: one machine, gateway up made the secret


def test_gateway_up_refuses_before_starting_anything(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GATEWAY_", "RAY_"))}
    env.update(GATEWAY_HOME=str(tmp_path), GATEWAY_HOST="0.0.0.0", GATEWAY_PORT=str(free_port()))
    began = time.monotonic()
    done = subprocess.run([str(GATEWAY), "up"], env=env, capture_output=True, text=True, timeout=120)
    said = done.stdout + done.stderr
    assert done.returncode == 1 and "refused" in said and "GATEWAY_GRPC_ALLOW_PLAINTEXT_ON_NETWORK" in said, said
    assert not (tmp_path / "postgres").exists(), "started PostgreSQL before refusing"
    print(f"refused in {time.monotonic() - began:.1f} s")

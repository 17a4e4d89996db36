"""bench.node_cpu: every process's CPU over a run, by role, per request (bench.metered's per-run line)."""

from __future__ import annotations

import os
import time

from bench.node_cpu import OTHER, NodeCpu, format_node, format_rest, role


def test_processes_are_named_by_the_first_role_they_match() -> None:
    assert role("ray::ServeReplica:gateway:Ingress", "") == "replica"
    assert role("ray::DashboardAgent", "") == "Ray metrics agent"
    assert role("ray::ServeController", "ray::ServeController") == "Serve controller"
    assert role("ray::SendRacerActor", "ray::SendRacerActor") == "gateway actors"
    assert role("python", "/venv/lib/python3.11/site-packages/ray/_private/log_monitor.py --x") == "Ray node"
    assert role("gcs_server", "/venv/.../ray/core/src/ray/gcs/gcs_server --log_dir=x") == "Ray node"
    assert role("python", "/venv/bin/python -m bench.const_upstream --port 1") == "upstream"
    assert role("haproxy", "/usr/sbin/haproxy -f /tmp/gw-haproxy-x/haproxy.cfg") == "HAProxy"
    assert role("postgres", "postgres: checkpointer") == "PostgreSQL"
    assert role("bash", "bash") == OTHER


def test_the_cpu_a_process_spent_is_counted_per_request_unless_left_out() -> None:
    node = NodeCpu()
    node.start()
    until = time.process_time() + 0.2
    while time.process_time() < until:  # this process spends 0.2 s of CPU
        pass
    counted = node.per_request(1_000, exclude=set())
    left_out = node.per_request(1_000, exclude={os.getpid()})
    assert counted[OTHER] >= 150, counted  # ≥ 0.15 s over 1,000 requests: ≥ 150 µs each
    assert left_out.get(OTHER, 0.0) < counted[OTHER] - 150, (left_out, counted)
    line = format_node({"replica": 250.4, "HAProxy": 44.0, OTHER: 3.0, "Redis": 0.4})
    assert line == "replica 250, HAProxy 44, other 3; machine 298 µs per request"


def test_at_rest_is_cpu_a_second_and_its_line_sums_rays_roles() -> None:
    node = NodeCpu()
    rest = node.at_rest(0.3, exclude={os.getpid()})
    assert all(value >= 0 for value in rest.values())
    line = format_rest({"Serve controller": 40.0, "gateway actors": 90.0, "PostgreSQL": 3.0, "Redis": 0.2}, 5_000)
    assert line == (
        "Serve controller 40.0, gateway actors 90.0, PostgreSQL 3.0 ms/s; "
        "Ray's and Serve's processes 130 ms of CPU a second (26 µs a request at 5,000 req/s)"
    )

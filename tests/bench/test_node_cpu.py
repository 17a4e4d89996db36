"""bench.node_cpu: every process's CPU over a run, by role, per request (bench.metered's per-run line)."""

from __future__ import annotations

import os
import time

from bench.node_cpu import OTHER, NodeCpu, format_node, role


def test_processes_are_named_by_the_first_role_they_match() -> None:
    assert role("ray::ServeReplica:gateway:Ingress", "") == "replica"
    assert role("ray::DashboardAgent", "") == "Ray metrics agent"
    assert role("ray::ServeController", "ray::ServeController") == "Ray (other)"
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

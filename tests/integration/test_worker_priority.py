"""``gateway up``'s Ray runs its workers (the ingress replicas, the Service replica, the gateway's actors) at the
machine's priority: Ray's own default is nice 15, below HAProxy, PostgreSQL, Redis and a local node, which then
preempt the replica whenever they wake (gateway/runtime/serve_runtime.py, ``RAY_worker_niceness``)."""

from __future__ import annotations

import psutil
import pytest

from gateway.runtime.serve_runtime import processes_naming
from tests.integration.service import INGRESS_REPLICA, RunningService

pytestmark = pytest.mark.integration


def test_ray_workers_run_at_the_priority_of_the_rest_of_the_stack(service: RunningService) -> None:
    stack = service.descendants()
    replicas = processes_naming(INGRESS_REPLICA, among=stack)
    workers = processes_naming("ray::", among=stack)  # every Ray worker's process title
    haproxy = processes_naming("haproxy", among=stack)
    assert replicas, "no ingress replica among the stack's processes"
    assert len(workers) > len(replicas), "the gateway's actors are Ray workers too"
    assert haproxy, "the stack's edge"
    niceness = {proc.pid: proc.nice() for proc in [*workers, *haproxy] if proc.is_running()}
    assert set(niceness.values()) == {psutil.Process().nice()}, niceness

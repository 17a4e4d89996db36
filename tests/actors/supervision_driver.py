"""A Ray driver for tests/actors/test_supervision.py: a real local Ray instance (``address="local"``), one
small plain actor class started through :mod:`actors.supervision` as ``gateway up`` starts the service's
actors. Prints one JSON document of what it saw. Run in a process of its own."""

from __future__ import annotations

import json
import os
import time
from typing import Any

import ray

from actors.cluster import NAMESPACE
from actors.supervision import pool_placement, start_singleton, stop_actors


class Counter:
    """A stand-in owner of state: its count lives in the actor's memory, as a shard's buckets do."""

    def __init__(self, start: int) -> None:
        self.count = start

    def bump(self) -> int:
        self.count += 1
        return self.count

    def pid(self) -> int:
        return os.getpid()

    def shutdown(self) -> None:
        return None


def main() -> None:
    ray.init(address="local", namespace=NAMESPACE, num_cpus=1, include_dashboard=False, log_to_driver=False)
    seen: dict[str, Any] = {}
    first = start_singleton("test-counter", Counter, 10)
    ray.get(first.bump.remote())
    again = start_singleton("test-counter", Counter, 100)  # another driver's start finds the same actor
    seen["found_again"] = ray.get(again.bump.remote())
    pid = ray.get(first.pid.remote())
    os.kill(pid, 9)  # a crash: Ray restarts it (max_restarts=-1), its memory starts again from the constructor
    deadline = time.monotonic() + 60
    while True:
        try:
            seen["after_crash"] = ray.get(first.bump.remote(), timeout=10)
            break
        except (ray.exceptions.RayActorError, ray.exceptions.GetTimeoutError):
            if time.monotonic() > deadline:
                raise
            time.sleep(0.5)
    seen["restarted_pid_differs"] = ray.get(first.pid.remote()) != pid
    seen["placement"] = type(pool_placement(3)).__name__
    stop_actors(["test-counter"], timeout_s=10.0)
    try:
        ray.get_actor("test-counter", namespace=NAMESPACE)
        seen["after_stop"] = "alive"
    except ValueError:
        seen["after_stop"] = "gone"
    ray.shutdown()
    print(json.dumps(seen))


if __name__ == "__main__":
    main()

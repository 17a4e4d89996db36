"""What every part of the runtime shares about the cluster: the actors' namespace and names, the Serve
app's name, the stop budget, and the two helpers of a stop (is the cluster still there; run a step
under a time bound). It imports nothing of the runtime, so the rest of the runtime may all import it.
"""

from __future__ import annotations

import logging
import socket
import threading
import time
from collections.abc import Callable

log = logging.getLogger(__name__)

#: The namespace of the service's named actors.
NAMESPACE = "gateway"
SERVE_APP_NAME = "gateway"
#: How long a stopping replica has, after ``drain_s``, for its requests in flight to finish (the longest,
#: sendAndConfirm, races up to 30 slots) and its shutdown to settle usage and give back leases and slices.
#: Serve kills the replica when it is over: what was not settled by then is lost (in the customer's favour).
STOP_GRACE_S = 30.0
#: Beyond a replica's drain and grace, how long Serve's shutdown may take (a replica scaled in).
STOP_SLACK_S = 5.0
#: How long ``gateway up``'s whole stop may take after SIGTERM: the grace period to give it
#: (docs/operations.md, Stopping: systemd's TimeoutStopSec, a container's stop timeout). Its parts:
#: Serve's shutdown (the replicas drain, settle usage, give back leases and slices) gets
#: ``SERVE_STOP_S``, the actors (gRPC seats, webhook deliveries) ``ACTORS_STOP_S``, all at once; then
#: Ray, the devnode, Redis and PostgreSQL, about a second each. A step over its share is given up on,
#: and named in the log; what a replica had not settled by then is lost in the customer's favour.
STOP_BUDGET_S = 20.0
SERVE_STOP_S = 10.0
ACTORS_STOP_S = 5.0


#: The pool of nodes' one owner of health (every replica and actor reads the pool's view from it).
UPSTREAM_HEALTH = "upstream-health"


def cluster_reachable(timeout_s: float = 1.0) -> bool:
    """Whether the GCS of the cluster this process joined still accepts connections: a quick way to
    skip the stop steps that would only wait for a cluster already gone."""
    import ray

    if not ray.is_initialized():
        return False
    host, _, port = str(ray.get_runtime_context().gcs_address).rpartition(":")
    try:
        with socket.create_connection((host, int(port)), timeout=timeout_s):
            return True
    except (OSError, ValueError):
        return False


def bounded(step: Callable[[], None], timeout_s: float, what: str, alive: Callable[[], bool] | None = None) -> None:
    """Run a stop step that talks to the cluster, giving up after ``timeout_s``. A process manager that
    signals the whole process group (systemd's default) stops a local GCS and raylet while
    ``gateway up`` is still stopping; Ray's calls then wait 60 s or more each for them. The step runs
    in a daemon thread, so one that never returns does not hold up the exit either."""
    done = threading.Event()
    failure: list[BaseException] = []

    def run() -> None:
        try:
            step()
        except BaseException as exc:  # handed to the caller below
            failure.append(exc)
        finally:
            done.set()

    threading.Thread(target=run, name=f"stop {what}", daemon=True).start()
    deadline = time.monotonic() + timeout_s
    while not done.wait(max(0.0, min(0.5, deadline - time.monotonic()))):
        if time.monotonic() >= deadline:
            log.warning("stopping: gave up on %s after %.0f s (it did not finish); going on", what, timeout_s)
            return
        if alive is not None and not alive():  # ``alive``: whether waiting longer can still help
            log.warning("stopping: gave up on %s: the Ray cluster stopped answering; going on", what)
            return
    if failure:
        raise failure[0]

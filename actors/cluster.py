"""What the actors share with the runtime that starts them and the processes that reach them: the
namespace of the service's named actors, their share of the stop, and the two helpers of a stop (is the
cluster still there; run a step under a time bound). Here, below both, so that ``actors/`` imports
nothing of ``gateway/runtime/`` (which imports ``actors/``): the ``actors-below-the-runtime`` contract.
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
#: The actors' share of ``gateway up``'s stop (gRPC seats, webhook deliveries), run at once with Serve's
#: (``gateway/runtime/cluster.py``: the whole budget and its other parts).
ACTORS_STOP_S = 5.0


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

"""What every part of the runtime shares about the cluster: the Serve app's name and the stop budget. It
imports nothing of the runtime, so the rest of the runtime may all import it. What the actors share with
the runtime (their namespace, the actors' share of the stop, the two helpers of a stop) is in
``actors/cluster.py``, below both: ``actors/`` imports nothing of the runtime, which imports it.
"""

from __future__ import annotations

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
#: ``SERVE_STOP_S``, the actors (gRPC seats, webhook deliveries) ``ACTORS_STOP_S`` (actors/cluster.py), all
#: at once; then Ray, the devnode, Redis and PostgreSQL, about a second each. A step over its share is given up on,
#: and named in the log; what a replica had not settled by then is lost in the customer's favour.
STOP_BUDGET_S = 20.0
SERVE_STOP_S = 10.0

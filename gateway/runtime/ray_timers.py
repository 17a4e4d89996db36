"""Ray's periodic timers that nothing of the gateway relies on, set longer or off (issue 64, item 4).

Each Ray process wakes on timers whether or not requests come; on a small machine what they spend at
rest is CPU the replicas do not get (bench/README.md, "Ray's timers at rest", measures it with
``python -m bench.idle``). These are environment variables read by Ray's processes when they start:
``gateway up`` puts them into its local Ray's environment (:func:`gateway.runtime.serve_runtime.ingress_env`)
and ``cluster.yaml``'s ``ray start`` commands carry them (tests/cluster/test_two_nodes.py checks).

Left as Ray sets them, because something relies on them: the memory monitor behind the out-of-memory
killer (``memory_monitor_refresh_ms``), the GCS's health checks of nodes (``health_check_*``), the
raylet's resource reports the GCS places actors and replicas by (``raylet_report_resources_period_milliseconds``),
the export of metrics to Prometheus that the alerts read (``metrics_report_interval_ms``), Serve's
autoscaling metrics (their record and push intervals), Serve's health checks of replicas and HAProxy's of
them, and Serve's control loop (already twice a second: ``RAY_SERVE_CONTROL_LOOP_INTERVAL_S``). Also left:
the raylet's idle-worker killing (``kill_idle_workers_interval_ms``, 200 ms): with it at 2 s, the stop test
(now in tests/stacks/test_restart.py) once found a stack process gone between listing and naming it
(likely a worker Ray started ahead and killed later than before), and what it saved was not measured apart.
"""

from __future__ import annotations

#: name → value; each line says what the timer is for and why its new period is safe.
RAY_TIMERS: dict[str, str] = {
    # The raylet checks every 100 ms whether a cluster-wide Python GC is due (it is due every 90 min,
    # `local_gc_interval_s`, or when the object store is under pressure): once a second is soon enough.
    "RAY_raylet_check_gc_period_milliseconds": "1000",
    # The raylet's check of the local disk's free space (object spilling refuses when full), 10 times a
    # second: once a second.
    "RAY_local_fs_monitor_interval_ms": "1000",
    # The raylet's debug state dump (debug_state.txt) every 10 s: every 10 minutes.
    "RAY_debug_dump_period_milliseconds": "600000",
    # Every worker sends its task events to the GCS every second, for `ray list tasks`, the dashboard's
    # task view and `ray.timeline()`, which nothing of the gateway reads: off (0).
    "RAY_task_events_report_interval_ms": "0",
    # The metrics agent samples its own event loop's lag 4 times a second for its own gauge: every 5 s.
    "RAY_DASHBOARD_AGENT_LOOP_MONITOR_INTERVAL_S": "5",
    # The log monitor lists the log directory on each pass (10 a second) while there are fewer than
    # 1,000 files; with no threshold it lists it every LOG_NAME_UPDATE_INTERVAL_S (a new worker's lines
    # then reach `gateway up`'s output up to 2 s later, none lost: a new file is read from its start).
    "RAY_LOG_MONITOR_MANY_FILES_THRESHOLD": "0",
    "LOG_NAME_UPDATE_INTERVAL_S": "2",
    # Each replica hands its cached request metrics to Ray 10 times a second; Ray exports them to
    # Prometheus every 10 s (`metrics_report_interval_ms`), so once a second loses no scrape.
    "RAY_SERVE_METRICS_EXPORT_INTERVAL_MS": "1000",
}

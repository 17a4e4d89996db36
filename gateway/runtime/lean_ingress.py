"""A lean replacement of Ray Serve's per-request direct-ingress path in an ingress replica.

Serve 2.60 runs every HTTP request of a direct-ingress replica through ``Replica._direct_ingress_asgi``
(``ray/serve/_private/replica.py``), which builds per request: a dict of the headers and more scans of it
(request id, disconnect and timeout flags, session and multiplexed-model ids), two UUIDs, a
``RequestMetadata``, the route (``_determine_http_route``, which raises and catches an ``AttributeError``
on every call for an app without ``.routes``, as the gateway's is), a request context set into a
``ContextVar``, the access-log line (an f-string built even when the logger drops it), a queued-request
count, a semaphore and a closure wrapping every ``send``. Measured in bench/README.md ("Serve's ingress
path, lean"); issue 64 has the profile.

:func:`lean_direct_ingress_asgi` does for a plain HTTP request of the gateway what of that Serve needs:

- the ongoing-request count (the replica's semaphore for ``max_ongoing_requests``, and the metrics manager's
  count that drain, autoscaling and ``serve_replica_processing_queries`` read), through Serve's own
  ``_semaphore`` and ``inc/dec_num_ongoing_requests``;
- the per-request metrics operators scrape (``serve_deployment_request_counter``, its error counter and
  latency histogram, the HTTP ingress counters and histogram, the utilization and maximum-latency
  windows), with the route and status Serve would give them. A request that failed or was answered 4xx
  or 5xx goes through Serve's own ``record_request_metrics`` and ``record_ingress_request_metrics``
  (a failure logged as Serve logs it, "Request failed."). The others, nearly all, are kept in a list
  (:class:`Later`) and handed to the same structures of Serve's in bulk, just before Serve's own report
  reads them every ``RAY_SERVE_METRICS_EXPORT_INTERVAL_MS`` (``_report_cached_metrics``): the same
  counts, latencies and windows, written as Serve's two methods write them, at a fraction of their
  cost a request (bench/README.md, "Serve's per-request metrics in bulk");
- disconnects and the request timeout: it takes only requests whose disconnects Serve would not watch
  (the edge, :class:`gateway.transports.ray_edge.ServeEdge`, marks every HTTP request
  ``x-request-disconnect-disabled`` after stripping the client's control headers; its exact header tuple,
  last, is the sign) and only while Serve has no request timeout (``http_options.request_timeout_s``);
- the edge's request id and client address are set in the scope by ``ServeEdge``, outside this.

Anything else goes to Serve's own path, unchanged: WebSockets, ``/-/healthz`` and ``/-/routes`` (HAProxy's
health checks), a request not marked by the edge, a replica with a route prefix other than ``/``, an app
with routes, an access log or tracing turned on, a ``max_queued_requests`` bound, user code on a thread of
its own. What it leaves out: Serve's request context (its request id in Serve's own log lines, and
cancelling the child requests of a deployment handle made inside the request; the gateway makes no such
calls while serving, and logs its own request id).

Hand-written over Serve's private replica internals (no setting of Serve makes its path cheaper):
``ray`` is pinned exactly (requirements.lock), :data:`REPLACED` holds a digest of the source of each
Serve function this replaces or relies on, and :func:`install` leaves Serve's path in place (and says
so) when one differs; tests/runtime/test_lean_ingress.py fails on such a Serve upgrade. The setting
``lean_ingress`` (``GATEWAY_LEAN_INGRESS``, on by default) turns it off (docs/configuration.md).
"""

from __future__ import annotations

import asyncio
import hashlib
import inspect
import logging
import time
from collections.abc import Callable, Mapping
from typing import Any

from starlette.types import Message, Receive, Scope, Send

from gateway.transports.ray_edge import DISCONNECT_DISABLED

log = logging.getLogger(__name__)

#: Serve's functions this replaces or relies on, by qualified name, with the first 16 hex digits of the
#: SHA-256 of their source in the pinned Ray (``python -m gateway.runtime.lean_ingress`` prints them).
REPLACED: dict[str, str] = {
    "replica.Replica._direct_ingress_asgi": "a8778f600375437a",
    "replica.Replica._wrap_request": "296ab09ad63e04f8",
    "replica.Replica._handle_errors_and_metrics": "65b1ee9a573f088b",
    "replica.Replica._record_errors_and_metrics": "4c0ece00f79fcc97",
    "replica.Replica._start_request": "f35fc2ba04f2c6f7",
    "replica.Replica._track_queued_request": "3092a06a6e01658e",
    "replica.Replica._can_accept_request": "168a078cc58471e7",
    "replica.Replica._determine_http_route": "595aa66bf012e30a",
    "replica.ReplicaMetricsManager._change_num_ongoing_requests": "32343969c28cbf5e",
    "replica.ReplicaMetricsManager.record_request_metrics": "229d4e59d89cc697",
    "replica.ReplicaMetricsManager.record_ingress_request_metrics": "35d39ba3f73c90d6",
    "replica.UserCallableWrapper._call_http_entrypoint": "c1946cac242f46a7",
    "http_util.ASGIAppReplicaWrapper.__call__": "63baf54c3abca265",
    # What :class:`Later` writes, and where it hands it over.
    "replica.ReplicaMetricsManager.__init__": "ff863918a5c96969",
    "replica.ReplicaMetricsManager._report_cached_metrics": "f0f7e1c062ead2af",
    "replica.ReplicaMetricsManager._report_cached_metrics_forever": "f2b8c2bb31753755",
    "rolling_window.RollingWindowAccumulator.add": "a40d96ee63271804",
    "rolling_window.RollingWindowMax.add": "803a66422ce9fbf9",
    "request_ingress_metrics.RequestIngressMetrics.request_tags": "cedf1bef20e737f6",
}

#: The paths Serve answers itself in a replica (HAProxy's health checks among them).
_SERVE_PATHS = frozenset({"/-/healthz", "/-/routes"})


def digests(pinned: Mapping[str, str] = REPLACED) -> dict[str, str]:
    """``pinned``'s names (under Serve's ``replica``, ``http_util``, ``rolling_window`` or
    ``request_ingress_metrics`` module) with the digests of their source in the installed Ray. A method the
    gateway wrapped (``gateway_original``, once or more) is read as Serve's own
    (:mod:`gateway.runtime.shared_port` pins the methods it wraps this way, and this module
    ``_report_cached_metrics``)."""
    from ray.serve._private import http_util, replica, request_ingress_metrics, rolling_window

    modules = {
        "replica": replica,
        "http_util": http_util,
        "rolling_window": rolling_window,
        "request_ingress_metrics": request_ingress_metrics,
    }
    found: dict[str, str] = {}
    for name in pinned:
        module, *path = name.split(".")
        obj: Any = modules[module]
        for part in path:
            obj = getattr(obj, part)
        while hasattr(obj, "gateway_original"):  # wrapped by the gateway, maybe twice: Serve's own below
            obj = obj.gateway_original
        source = inspect.getsource(obj)
        found[name] = hashlib.sha256(source.encode()).hexdigest()[:16]
    return found


def changed(pinned: Mapping[str, str] = REPLACED) -> list[str]:
    """The names of ``pinned`` whose source differs from what this was written against."""
    try:
        now = digests(pinned)
    except (AttributeError, ImportError, OSError, TypeError):
        return ["(Serve's replica module)"]
    return [name for name, digest in pinned.items() if now.get(name) != digest]


def install() -> bool:
    """Make this process's Serve replicas serve plain HTTP requests through :func:`lean_direct_ingress_asgi`.

    Called in the ingress replica's constructor, before Serve starts the replica's HTTP server (which
    binds ``self._direct_ingress_asgi`` when it starts). Idempotent. False, and Serve's own path kept,
    when Serve's internals are not those this was written against."""
    from ray.serve._private import replica

    current = replica.Replica._direct_ingress_asgi
    if getattr(current, "gateway_lean", False):
        return True
    differing = changed()
    if differing:
        log.warning("lean ingress: Serve's own request path kept, Serve differs in %s", ", ".join(differing))
        return False
    lean = _make_lean(current)
    manager = replica.ReplicaMetricsManager
    manager._report_cached_metrics = _hand_over_first(manager._report_cached_metrics)  # type: ignore[method-assign]
    replica.Replica._direct_ingress_asgi = lean  # type: ignore[method-assign]
    return True


#: How many requests :class:`Later` keeps before it hands them over itself (Serve's report, ten times a
#: second by default, normally takes them first: a few thousand at most).
LATER_MAX = 10_000


class Later:
    """The Serve metrics of one replica's plain successes (no failure, status below 400), kept until
    Serve's next report: the bulk form of what ``record_request_metrics`` and
    ``record_ingress_request_metrics`` write a request when Serve's cached metrics are on. Written on the
    replica's event loop only, as Serve's own cached metrics are."""

    def __init__(self, manager: Any, route: str, app_name: str, ingress: bool) -> None:
        from ray.serve._private.common import RequestProtocol
        from ray.serve._private.request_ingress_metrics import RequestIngressMetrics

        self.route = route
        self.app_name = app_name
        self.ingress = ingress  # whether Serve's replica records its HTTP ingress metrics itself
        self.pending: list[tuple[str, int, float]] = []  # (method, status, latency in ms) a request
        self._manager = manager
        self._http = RequestProtocol.HTTP
        self._tags = RequestIngressMetrics.request_tags
        self._keys: dict[tuple[str, int], frozenset[tuple[str, str]]] = {}

    def add(self, method: str, status: int, latency_ms: float) -> None:
        pending = self.pending
        pending.append((method, status, latency_ms))
        if len(pending) >= LATER_MAX:  # Serve's report is not running: do not grow without bound
            self.hand_over()

    def hand_over(self) -> None:
        """Write what is kept into Serve's structures, as Serve's two methods would have one by one."""
        pending, self.pending = self.pending, []
        if not pending:
            return
        manager, route = self._manager, self.route
        latencies = [latency for _, _, latency in pending]
        manager._user_code_time_accumulator.add(sum(latencies))  # a sum in a window's bucket
        manager._max_processing_latency_trackers[route].add(max(latencies))  # and the bucket's maximum
        manager._cached_latencies[route].extend(latencies)
        manager._cached_request_counter[route] += len(pending)
        if not self.ingress:
            return
        counts = manager._cached_ingress_request_counter[self._http]
        kept = manager._cached_ingress_processing_latencies[self._http]
        keys = self._keys
        for method, status, latency in pending:
            key = keys.get((method, status))
            if key is None:
                key = frozenset(
                    self._tags(route=route, method=method, application=self.app_name, status_code=str(status)).items()
                )
                if len(keys) < 256:  # methods and statuses are few (llhttp's methods); bounded anyway
                    keys[(method, status)] = key
            counts[key] += 1
            kept[key].append(latency)


#: The manager's attribute holding its replica's :class:`Later` (Serve's manager is a plain object).
_LATER = "_gateway_later"


def _hand_over_first(report: Callable[[Any], None]) -> Callable[[Any], None]:
    """Serve's ``_report_cached_metrics``, handing over the kept requests' metrics first (wrapped once:
    :func:`install` returns early once the lean path is in place)."""

    def reporting(manager: Any) -> None:
        later: Later | None = getattr(manager, _LATER, None)
        if later is not None:
            later.hand_over()
        report(manager)

    reporting.gateway_original = report  # type: ignore[attr-defined]
    return reporting


def _make_lean(serve_path: Callable[..., Any]) -> Callable[..., Any]:
    from ray.serve._private.common import RequestMetadata, RequestProtocol
    from ray.serve._private.replica import logger as serve_logger
    from ray.serve._private.tracing_utils import is_tracing_enabled

    http = RequestProtocol.HTTP
    # What the metrics manager's ongoing-request count reads of a request: its protocol, and that it is
    # direct ingress. One for every request, as nothing else of it is read there.
    counted = RequestMetadata(
        request_id="", internal_request_id="", _request_protocol=http, is_direct_ingress=True, is_streaming=True
    )
    fits: dict[int, bool] = {}  # per replica (id): whether its configuration lets requests take this path

    def replica_fits(replica: Any) -> bool:
        fit = fits.get(id(replica))
        if fit is None:
            options = replica._http_options
            fit = (
                (replica._route_prefix or "/") == "/"
                and replica._user_callable_asgi_app is not None
                and not hasattr(replica._user_callable_asgi_app, "routes")
                and not replica._user_callable_wrapper._run_user_code_in_separate_thread
                and replica.max_queued_requests == -1
                and options is not None
                and options.request_timeout_s is None
            )
            fits[id(replica)] = fit
            manager = replica._metrics_manager
            if fit and manager._cached_metrics_enabled and getattr(manager, _LATER, None) is None:
                ingress = manager._should_emit_request_ingress_metrics(http)
                later = Later(manager, replica._route_prefix or "", replica._deployment_id.app_name, ingress)
                setattr(manager, _LATER, later)
        return fit

    async def lean_direct_ingress_asgi(self: Any, scope: Scope, receive: Receive, send: Send) -> None:
        headers = scope["headers"]
        if (
            scope["type"] != "http"
            or not headers
            or headers[-1] is not DISCONNECT_DISABLED  # not through the edge: Serve reads the control headers
            or scope["path"] in _SERVE_PATHS
            or scope.get("root_path")
            or serve_logger.isEnabledFor(logging.INFO)  # the access log: Serve writes it
            or is_tracing_enabled()
            or not replica_fits(self)
        ):
            await serve_path(self, scope, receive, send)
            return
        start = time.time()
        status: int | None = None

        async def send_seen(message: Message) -> None:  # the status, for the metrics
            nonlocal status
            if status is None and message["type"] == "http.response.start":
                status = message["status"]
            await send(message)

        metrics = self._metrics_manager
        failure: BaseException | None = None
        semaphore = self._semaphore
        try:
            await semaphore.acquire()
            try:
                metrics.inc_num_ongoing_requests(counted)
                try:
                    await self._user_callable_asgi_app(scope, receive, send_seen)
                finally:
                    metrics.dec_num_ongoing_requests(counted)
            finally:
                semaphore.release()
        except asyncio.CancelledError as exc:  # as Serve: recorded, not raised (direct ingress)
            failure = exc
        except Exception as exc:
            failure = exc
            serve_logger.exception("Request failed.")
            self._on_request_failed(counted, exc)
        latency_ms = (time.time() - start) * 1000
        if failure is None and status is not None and status < 400:
            later: Later | None = getattr(metrics, _LATER, None)
            if later is not None:  # Serve's cached metrics: handed over with its next report
                later.add(scope["method"], status, latency_ms)
                return
        route = self._route_prefix or ""  # as Serve's _determine_http_route for an app without routes
        metrics.record_request_metrics(
            route=route,
            latency_ms=latency_ms,
            is_error=failure is not None,
            exception_type=None if failure is None else type(failure).__name__,
        )
        if status is not None:
            code = str(status)
            metrics.record_ingress_request_metrics(
                protocol=http,
                method=scope["method"],
                route=route,
                app_name=self._deployment_id.app_name,
                deployment_name=self._deployment_id.name,
                latency_ms=latency_ms,
                is_error=code.startswith(("4", "5")),
                status_code=code,
            )

    lean_direct_ingress_asgi.gateway_lean = True  # type: ignore[attr-defined]
    lean_direct_ingress_asgi.serve_path = serve_path  # type: ignore[attr-defined]
    return lean_direct_ingress_asgi


if __name__ == "__main__":
    for _name, _digest in digests().items():
        print(f'    "{_name}": "{_digest}",')

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
  latency histogram, the HTTP ingress counters and histogram), through Serve's own
  ``record_request_metrics`` and ``record_ingress_request_metrics``, with the route and status Serve
  would give them; a failing request is logged as Serve logs it ("Request failed.");
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
}

#: The paths Serve answers itself in a replica (HAProxy's health checks among them).
_SERVE_PATHS = frozenset({"/-/healthz", "/-/routes"})


def digests(pinned: Mapping[str, str] = REPLACED) -> dict[str, str]:
    """``pinned``'s names (under Serve's ``replica`` or ``http_util`` module) with the digests of their source
    in the installed Ray. A method a wrapper of the gateway's replaced (``gateway_original``) is read as
    Serve's own (:mod:`gateway.runtime.shared_port` pins the methods it wraps this way)."""
    from ray.serve._private import http_util, replica

    modules = {"replica": replica, "http_util": http_util}
    found: dict[str, str] = {}
    for name in pinned:
        module, *path = name.split(".")
        obj: Any = modules[module]
        for part in path:
            obj = getattr(obj, part)
        source = inspect.getsource(getattr(obj, "gateway_original", obj))
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
    replica.Replica._direct_ingress_asgi = lean  # type: ignore[method-assign]
    return True


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

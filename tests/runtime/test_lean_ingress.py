"""The lean direct-ingress path (gateway/runtime/lean_ingress.py) in a real Serve replica.

The first test fails when a Ray upgrade changes a Serve function the lean path replaces or relies on
(then :func:`gateway.runtime.lean_ingress.install` keeps Serve's own path, and the digests are to be
renewed after reading the new source: ``python -m gateway.runtime.lean_ingress``). The others start a
local Ray with direct ingress as ``gateway up`` sets it (``ServeRuntime.start_ray``: the edge's
middleware in front of the replica) and a probe deployment that installs the lean path as the gateway's
``Ingress`` does, and check through HTTP what Serve's bookkeeping sees: the ongoing-request count while a
request is held and after, the per-request metrics Serve is handed (route, status, errors), a failing
request answered 500 and counted as an error, Serve's own health check still Serve's, and the edge's
client address and request id reaching the app, and what Serve's report exports of the requests the lean path
keeps for it (:class:`gateway.runtime.lean_ingress.Later`). The whole service's path (drain, autoscaling, the
scraped metrics) runs through it in the stack tier (tests/stacks' test_restart, test_autoscaling and test_edge,
tests/integration/test_prometheus_scrape), as it is on by default.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from gateway.pipeline.http import EDGE_REQUEST_ID
from gateway.runtime import lean_ingress
from gateway.runtime.ports import free_port
from gateway.transports.ray_edge import EDGE_SECRET_ENV

REPO = Path(__file__).resolve().parents[2]
#: The edge's secret the replicas are started with (HAProxy sends it; here the test does).
SECRET = "5e" * 16

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")


def test_serve_is_what_the_lean_path_was_written_against() -> None:
    assert lean_ingress.changed() == []


class ProbeApp:
    """The probe's ASGI app: ``/hold`` waits until ``/release``; ``/boom`` raises; ``/teapot`` answers 418;
    ``/state`` says what the replica and Serve's metrics manager saw, and what Serve's report exported. No
    ``routes`` attribute, as the gateway's app has none."""

    def __init__(self) -> None:
        self.released = asyncio.Event()
        self.recorded: list[dict[str, Any]] = []
        self.exported: list[dict[str, Any]] = []
        self.replica: Any = None

    def find_replica(self) -> Any:
        """Serve's replica object: the ``self`` of the request path that called this app (up the frames of
        the coroutines awaiting it), its metrics manager's recorders wrapped to keep what they are given."""
        if self.replica is None:
            from ray.serve._private.replica import Replica

            frame = sys._getframe(1)
            while frame is not None and not isinstance(frame.f_locals.get("self"), Replica):
                frame = frame.f_back  # type: ignore[assignment]
            assert frame is not None, "no Serve replica up the call chain"
            self.replica = frame.f_locals["self"]
            manager = self.replica._metrics_manager
            for name in ("record_request_metrics", "record_ingress_request_metrics"):
                serve_record = getattr(manager, name)

                def record(serve_record: Any = serve_record, name: str = name, **kwargs: Any) -> None:
                    self.recorded.append({"recorder": name, **{k: str(v) for k, v in kwargs.items()}})
                    serve_record(**kwargs)

                setattr(manager, name, record)
            # What Serve's report hands to Ray's metrics: the series operators scrape.
            from ray.serve._private.common import RequestProtocol

            ingress = manager._ingress_metrics[RequestProtocol.HTTP]
            for series, metric, method in (
                ("requests", manager._request_counter, "inc"),
                ("latencies", manager._processing_latency_tracker, "observe"),
                ("ingress_requests", ingress.request_counter, "inc"),
                ("ingress_latencies", ingress.processing_latency_tracker, "observe"),
            ):
                serve_export = getattr(metric, method)

                def export(
                    value: float = 1.0, tags: Any = None, series: str = series, serve_export: Any = serve_export
                ) -> None:
                    self.exported.append({"series": series, "value": value, "tags": dict(tags or {})})
                    serve_export(value, tags=tags)

                setattr(metric, method, export)
        return self.replica

    @staticmethod
    def served_by() -> str:
        """The name of the request path up the call chain: Serve's, or the lean one."""
        frame = sys._getframe(1)
        while frame is not None:
            if frame.f_code.co_name in ("lean_direct_ingress_asgi", "_direct_ingress_asgi"):
                return frame.f_code.co_name
            frame = frame.f_back  # type: ignore[assignment]
        return "none"

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "lifespan":  # Serve runs the app's lifespan at the replica's start and stop
            while (await receive())["type"] == "lifespan.startup":
                await send({"type": "lifespan.startup.complete"})
            await send({"type": "lifespan.shutdown.complete"})
            return
        replica = self.find_replica()
        path = scope["path"]
        if path == "/hold":
            await self.released.wait()
        elif path == "/release":
            self.released.set()
        elif path == "/boom":
            raise RuntimeError("boom")
        elif path == "/teapot":
            await send({"type": "http.response.start", "status": 418, "headers": []})
            await send({"type": "http.response.body", "body": b"{}"})
            return
        from ray.serve import context

        body = {
            "lean": getattr(type(replica)._direct_ingress_asgi, "gateway_lean", False),
            "served_by": self.served_by(),
            "serve_request_id": context._get_serve_request_context().request_id,
            "ongoing": replica.get_num_ongoing_requests(),
            "manager_ongoing": replica._metrics_manager._num_ongoing_requests,
            "recorded": self.recorded,
            "exported": self.exported,
            "client": scope.get("client"),
            "edge_request_id": scope.get(EDGE_REQUEST_ID),
        }
        await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"application/json")]})
        await send({"type": "http.response.body", "body": json.dumps(body).encode()})


def probe_deployment() -> Any:
    from ray import serve
    from ray.serve.schema import LoggingConfig

    # The gateway's logging (gateway/runtime/ingress.py): with Serve's logger at INFO the access log is
    # Serve's to write, and requests take Serve's path.
    @serve.deployment(
        name="Probe",
        ray_actor_options={"num_cpus": 0},
        logging_config=LoggingConfig(enable_access_log=False, log_level="WARNING"),
    )
    @serve.ingress()
    class Probe:
        def __init__(self) -> None:
            from gateway.runtime.lean_ingress import install

            assert install()
            self.probe_app = ProbeApp()

        def __serve_build_asgi_app__(self) -> Any:
            return self.probe_app

    return Probe


#: The probe's Ray driver, a process of its own as the other tests' Ray drivers are (a Ray started inside
#: the test process after other tests' Ray work aborted it once in CI, in ``serve.start``): it starts a
#: local Ray and Serve, deploys the probe, says ``ready`` and serves until its stdin closes.
DRIVER = """
import sys
import ray
from ray import serve
from gateway.runtime.serve_runtime import loopback_only_ray
from tests.runtime.test_lean_ingress import probe_deployment

loopback_only_ray()
ray.init(address="local", namespace="lean-probe", include_dashboard=False, _node_ip_address="127.0.0.1")
try:
    serve.start(http_options={"host": "127.0.0.1", "port": int(sys.argv[1])})  # Serve's proxy, elsewhere
    serve.run(probe_deployment().bind(), name="probe", route_prefix="/")
    print("ready", flush=True)
    sys.stdin.readline()
finally:
    serve.shutdown()
    ray.shutdown()
"""


@pytest.fixture(scope="module")
def probe(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    from gateway.app.settings import Settings
    from gateway.runtime.serve_runtime import ingress_env

    port = free_port()
    home = tmp_path_factory.mktemp("lean")
    settings = Settings(home=home, port=port, ingress_mode="direct", metrics_export_port=free_port())
    # `gateway up`'s Serve settings (the edge's middleware in front of the replica among them), inherited by
    # Ray's processes; the replica's port range is [MIN, MAX) in Serve 2.60, so MAX is one past it.
    env = {**os.environ, **ingress_env(settings, str(home))}
    env["RAY_SERVE_DIRECT_INGRESS_MAX_HTTP_PORT"] = str(port + 1)
    env[EDGE_SECRET_ENV] = SECRET  # HAProxy would send it; here the test does
    driver = subprocess.Popen(
        [sys.executable, "-c", DRIVER, str(free_port())],
        cwd=REPO,
        env=env,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert driver.stdout is not None
        said = []  # Ray's processes may print to the driver's stdout (their log lines) before it says ready
        while not said or said[-1] != "ready":
            line = driver.stdout.readline()
            assert line, f"the probe did not start: {said[-20:]}"
            said.append(line.strip())
        url = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 120
        while True:  # the replica's own server comes up after serve.run returns
            try:
                get(url + "/state")
                break
            except OSError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.2)
        yield url
    finally:
        assert driver.stdin is not None
        driver.stdin.close()
        try:
            driver.wait(60)
        except subprocess.TimeoutExpired:
            driver.kill()
            driver.wait()


def get(url: str, headers: dict[str, str] | None = None, method: str = "GET") -> dict[str, Any]:
    request = urllib.request.Request(url, headers=headers or {}, method=method)
    with urllib.request.urlopen(request, timeout=60) as response:
        answer: dict[str, Any] = json.loads(response.read())
        return answer


def test_a_plain_request_takes_the_lean_path_and_is_counted_as_serve_counts_it(probe: str) -> None:
    state = get(probe + "/state")
    assert state["lean"] is True and state["served_by"] == "lean_direct_ingress_asgi"
    assert state["serve_request_id"] == ""  # Serve's path sets a request context; the lean one does not
    assert state["ongoing"] == 1 and state["manager_ongoing"] == 1  # this request itself
    for _ in range(3):  # POST: no other test's requests are
        get(probe + "/state", method="POST")
    deadline = time.monotonic() + 30
    while True:  # Serve reports ten times a second; the lean path's successes reach its next report
        exported = [e for e in get(probe + "/state")["exported"] if e["tags"].get("method") == "POST"]
        if sum(e["value"] for e in exported if e["series"] == "ingress_requests") >= 3:
            break
        assert time.monotonic() < deadline, f"Serve's report never exported the 3 POSTs: {exported}"
        time.sleep(0.2)
    tags = {"route": "/", "method": "POST", "application": "probe", "status_code": "200"}
    assert {tuple(sorted(e["tags"].items())) for e in exported} == {tuple(sorted(tags.items()))}
    assert sum(e["value"] for e in exported if e["series"] == "ingress_requests") == 3
    assert len([e for e in exported if e["series"] == "ingress_latencies"]) == 3  # one observation each
    assert all(0 < e["value"] < 60_000 for e in exported if e["series"] == "ingress_latencies")  # milliseconds
    after = get(probe + "/state")
    deployment = [e for e in after["exported"] if e["series"] in ("requests", "latencies")]
    assert {e["tags"]["route"] for e in deployment} == {"/"}
    assert sum(e["value"] for e in deployment if e["series"] == "requests") >= 4  # the GET and the POSTs at least
    # none of the lean path's one by one (Serve's own path records each request it serves: another test's
    # /-/healthz, which may have run first)
    assert not [r for r in after["recorded"] if r.get("status_code") == "200" and r.get("route") == "/"]


def test_a_refusal_is_counted_one_by_one_as_serve_counts_it(probe: str) -> None:
    before = len(get(probe + "/state")["recorded"])
    with pytest.raises(urllib.error.HTTPError) as refused:
        get(probe + "/teapot")
    assert refused.value.code == 418
    mine = get(probe + "/state")["recorded"][before:]
    assert [r["recorder"] for r in mine] == ["record_request_metrics", "record_ingress_request_metrics"]
    request, ingress = mine
    assert request["route"] == "/" and request["is_error"] == "False" and request["exception_type"] == "None"
    assert ingress["route"] == "/" and ingress["method"] == "GET" and ingress["status_code"] == "418"
    assert ingress["is_error"] == "True" and ingress["app_name"] == "probe" and ingress["deployment_name"] == "Probe"
    assert ingress["protocol"].endswith("HTTP")


def test_a_held_request_is_ongoing_until_it_ends(probe: str) -> None:
    held: dict[str, Any] = {}
    thread = threading.Thread(target=lambda: held.update(get(probe + "/hold")))
    thread.start()
    try:
        deadline = time.monotonic() + 60
        while get(probe + "/state")["ongoing"] < 2:  # the held one and this one
            assert time.monotonic() < deadline, "the held request never counted as ongoing"
            time.sleep(0.05)
    finally:
        get(probe + "/release")
        thread.join(60)
    assert held["lean"] is True
    state = get(probe + "/state")
    assert state["ongoing"] == 1 and state["manager_ongoing"] == 1  # only this one again


def test_a_failing_request_is_a_500_and_counted_as_an_error(probe: str) -> None:
    before = len(get(probe + "/state")["recorded"])
    with pytest.raises(urllib.error.HTTPError) as failed:
        get(probe + "/boom")
    assert failed.value.code == 500
    errors = [r for r in get(probe + "/state")["recorded"][before:] if r["is_error"] == "True"]
    # No ingress record: the app sent no status (uvicorn's own 500), as on Serve's path.
    assert [(r["recorder"], r["exception_type"]) for r in errors] == [("record_request_metrics", "RuntimeError")]
    assert get(probe + "/state")["ongoing"] == 1


def test_serves_health_check_is_still_serves(probe: str) -> None:
    with urllib.request.urlopen(probe + "/-/healthz", timeout=60) as response:
        assert response.status == 200
        assert b"success" in response.read()


def test_the_edges_client_address_and_request_id_reach_the_app(probe: str) -> None:
    edge = {"X-Gateway-Edge": SECRET, "X-Gateway-Client": "203.0.113.9", "X-Gateway-Request-Id": "ab" * 16}
    # Serve's timeout header never reaches Serve (the edge strips it): the request is not cut short.
    state = get(probe + "/state", {**edge, "X-Request-Timeout-Seconds": "0.000001"})
    assert state["lean"] is True
    assert state["client"][0] == "203.0.113.9"
    assert state["edge_request_id"] == "ab" * 16
    forged = get(probe + "/state", {**edge, "X-Gateway-Edge": "not-the-secret"})
    assert forged["client"][0] == "127.0.0.1" and forged["edge_request_id"] is None

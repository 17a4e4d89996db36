"""Issue 29: the gateway's metrics scraped by a real Prometheus, with the scrape config, alert rules and
dashboard of docs/operations.md (``ops/``).

The package's stack (tests/integration/conftest.py: Ray's processes report every second), one Prometheus
(Debian's ``prometheus`` package, installed by ``.ci/run``) scraping it every second. Paid calls from solana-py,
then the series read back through Prometheus's HTTP API must have moved by exactly those calls. The stack is
shared, so each count is read as a change: its value once it has stopped moving (the package's earlier tests'
calls reported and scraped), then the value it moves to; the stack tier runs one test at a time, so nothing
else calls the stack in between.
"""

from __future__ import annotations

import asyncio
import json
import re
import shutil
import subprocess
import time
import urllib.parse
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import grpc
import pytest
from solders.keypair import Keypair
from websockets.asyncio.client import connect

from actors.metrics import declare_every_metric
from gateway.base import metrics
from gateway.runtime.ports import free_port
from gateway_client import solana_client
from tests.grpc.conftest import generate_client
from tests.integration.service import (
    REPO,
    Customer,
    RunningService,
    create_api_key,
    funded_customer,
    post_json,
)

#: In this order, also in a shuffled run (pytest-random-order): the dashboard test looks for the series the
#: tests before it made the stack export.
pytestmark = [pytest.mark.integration, pytest.mark.slow, pytest.mark.random_order(disabled=True)]

OPS = REPO / "ops"
CALLS = 5
#: What this run does not cause and is not exported before its first event: a histogram with no
#: observation (a counter's documented series are exported at 0 from the start: gateway/base/metrics.py).
NOT_EXERCISED = {
    "gateway_send_landing_duration_seconds_bucket",
    # a pool of one node never retries, hedges or fails over (tests/node/test_pool.py counts them)
    "gateway_upstream_retries_total",
    "gateway_upstream_hedges_total",
    "gateway_upstream_failovers_total",
}


@dataclass
class Prometheus:
    url: str
    process: subprocess.Popen[bytes]

    def query(self, expr: str) -> list[dict[str, Any]]:
        qs = urllib.parse.urlencode({"query": expr})
        with urllib.request.urlopen(f"{self.url}/api/v1/query?{qs}", timeout=10) as resp:
            doc = json.loads(resp.read())
        assert doc["status"] == "success", doc
        result: list[dict[str, Any]] = doc["data"]["result"]
        return result

    def value(self, expr: str) -> float | None:
        """The value of a query that sums to one series; None while it has none."""
        result = self.query(expr)
        return float(result[0]["value"][1]) if result else None

    def wait_for(self, expr: str, expected: float, timeout_s: float = 90.0) -> float | None:
        """Poll until ``expr`` equals ``expected`` (metrics reach Prometheus a report and a scrape
        later); returns the last value either way, for the caller's assertion."""
        deadline = time.monotonic() + timeout_s
        value = self.value(expr)
        while value != expected and time.monotonic() < deadline:
            time.sleep(0.5)
            value = self.value(expr)
        return value

    def ready(self) -> bool:
        try:
            with urllib.request.urlopen(f"{self.url}/-/ready", timeout=5) as resp:
                return int(resp.status) == 200
        except OSError:  # not listening yet, or 503 while it starts
            return False

    def wait_for_some(self, expr: str, timeout_s: float = 90.0) -> float | None:
        """Poll until ``expr`` has a value (a gauge set by a background loop)."""
        deadline = time.monotonic() + timeout_s
        value = self.value(expr)
        while value is None and time.monotonic() < deadline:
            time.sleep(0.5)
            value = self.value(expr)
        return value

    def wait_for_at_least(self, expr: str, least: float, timeout_s: float = 90.0) -> float:
        """Poll until ``expr`` is at least ``least`` (a series others add to as well); the last value."""
        deadline = time.monotonic() + timeout_s
        value = self.value(expr) or 0.0
        while value < least and time.monotonic() < deadline:
            time.sleep(0.5)
            value = self.value(expr) or 0.0
        return value

    def settled(self, *exprs: str, quiet_s: float = 3.0, timeout_s: float = 60.0) -> list[float]:
        """The values of ``exprs`` once none has moved for ``quiet_s`` (a report and a scrape are a second
        each here), 0 for one with no series: what a later change is counted from. Watched together, so the
        wait is one quiet spell, not one a series."""
        deadline = time.monotonic() + timeout_s
        last, since = [self.value(expr) or 0.0 for expr in exprs], time.monotonic()
        while time.monotonic() - since < quiet_s:
            assert time.monotonic() < deadline, f"{exprs} kept moving for {timeout_s} s"
            time.sleep(0.5)
            now = [self.value(expr) or 0.0 for expr in exprs]
            if now != last:
                last, since = now, time.monotonic()
        return last

    def names(self) -> set[str]:
        with urllib.request.urlopen(f"{self.url}/api/v1/label/__name__/values", timeout=10) as resp:
            return set(json.loads(resp.read())["data"])


def prometheus_config(metrics_port: int) -> str:
    """``ops/prometheus.yml`` as docs/operations.md gives it, pointed at this stack, scraping every second."""
    text = (OPS / "prometheus.yml").read_text()
    assert '"127.0.0.1:9400"' in text and "scrape_interval: 15s" in text
    return text.replace('"127.0.0.1:9400"', f'"127.0.0.1:{metrics_port}"').replace(
        "scrape_interval: 15s", "scrape_interval: 1s"
    )


@pytest.fixture(scope="module")
def prometheus(service: RunningService, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Prometheus]:
    binary = shutil.which("prometheus")
    assert binary is not None, "Debian's prometheus package is not installed (.ci/run installs it)"
    workdir = tmp_path_factory.mktemp("prometheus")
    (workdir / "prometheus.yml").write_text(prometheus_config(int(service.env["GATEWAY_METRICS_EXPORT_PORT"])))
    shutil.copy(OPS / "alerts.yml", workdir / "alerts.yml")
    port = free_port()
    log = (workdir / "prometheus.log").open("wb")
    process = subprocess.Popen(
        [
            binary,
            f"--config.file={workdir / 'prometheus.yml'}",
            f"--storage.tsdb.path={workdir / 'data'}",
            f"--web.listen-address=127.0.0.1:{port}",
        ],
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    prom = Prometheus(f"http://127.0.0.1:{port}", process)
    try:
        deadline = time.monotonic() + 60
        while not prom.ready():
            assert process.poll() is None, (workdir / "prometheus.log").read_text()[-3000:]
            assert time.monotonic() < deadline, "Prometheus did not start"
            time.sleep(0.25)
        while prom.value('up{job="gateway"}') != 1.0:
            assert process.poll() is None, (workdir / "prometheus.log").read_text()[-3000:]
            assert time.monotonic() < deadline, "Prometheus never scraped the gateway's metrics port"
            time.sleep(0.5)
        yield prom
    finally:
        process.terminate()
        process.wait(timeout=30)
        log.close()


def ready(prometheus: Prometheus) -> None:
    """Calls are answered only once a scrape has seen the health probe's gauge: then a later value is
    this test's doing."""
    assert prometheus.wait_for('max(gateway_upstream_up{node="primary"})', 1.0) == 1.0


@pytest.fixture(scope="module")
def customer(service: RunningService) -> Customer:
    """This module's own wallet (the package's is other modules' too), with 1 USDC of credits."""
    return funded_customer(service)


def test_paid_calls_move_the_series_by_what_they_did(
    service: RunningService, prometheus: Prometheus, customer: Customer
) -> None:
    ready(prometheus)
    http_cheap = 'wire="http",method_class="READ_CHEAP"'
    charged = 'gateway_credits_total{method_class="READ_CHEAP",outcome="charged"}'
    ok = 'sum(gateway_upstream_request_duration_seconds_count{outcome="ok",node="primary"})'
    moved = {  # each series by what these calls add to it
        f'sum(gateway_requests_total{{{http_cheap},status="200"}})': CALLS,
        f"sum(gateway_request_duration_seconds_count{{{http_cheap}}})": CALLS,
        # the histogram reaches Ray as counters (actors/metrics.py): its buckets still make a quantile
        f'sum(gateway_request_duration_seconds_bucket{{{http_cheap},le="+Inf"}})': CALLS,
        f"sum({charged})": CALLS * 1,  # READ_CHEAP: 1 credit (docs/api.md)
        # every getSlot was looked up in the response cache first (never cached)
        'sum(gateway_response_cache_lookups_total{result="miss"})': CALLS,
    }
    unmoved = [
        'sum(gateway_credits_total{outcome="refunded"})',  # nothing refunded
        # the account's limits came from its shard (account_shards defaults to 2), never refused for want of it
        'sum(gateway_account_slice_exchanges_total{result="unavailable"})',
    ]
    duration_sum = f"sum(gateway_request_duration_seconds_sum{{{http_cheap}}})"
    watched = [*moved, *unmoved, duration_sum]
    before = dict(zip(watched, prometheus.settled(*watched), strict=True))
    before[ok] = prometheus.value(ok) or 0.0  # the actors' reads keep it moving: only a lower bound is asserted

    async def paid_calls() -> None:
        async with solana_client(service.url, api_key=customer.api_key) as client:
            for _ in range(CALLS):
                assert (await client.get_slot()).value > 0

    asyncio.run(paid_calls())

    for expr, by in moved.items():
        assert prometheus.wait_for(expr, before[expr] + by) == before[expr] + by, expr
    for expr in unmoved:  # read once the calls' own counts are in: a replica reports them together
        assert (prometheus.value(expr) or 0.0) == before[expr], expr
    spent = (prometheus.value(duration_sum) or 0.0) - before[duration_sum]
    assert 0 < spent < CALLS * 10  # seconds: each call well under the 10 s bucket
    median = prometheus.value(
        f"histogram_quantile(0.5, sum by (le) (gateway_request_duration_seconds_bucket{{{http_cheap}}}))"
    )
    assert median is not None and 0 < median <= 10.0, median
    # every getSlot went to the node (the actors' own reads of the node count there too: at least the calls)
    assert prometheus.wait_for_at_least(ok, before[ok] + CALLS) >= before[ok] + CALLS
    assert (prometheus.value('sum(gateway_credit_lease_requests_total{result="granted"})') or 0) >= 1
    assert (prometheus.value('sum(gateway_account_slice_exchanges_total{result="answered"})') or 0) >= 1

    # Serve's two latency histograms, counted in the replica (gateway/runtime/serve_metrics.py), under the
    # series names Serve's own histograms have: every call of this test is in them, their buckets make a
    # quantile, and no counter's _total name is left over
    for serve_histogram in ("ray_serve_deployment_processing_latency_ms", "ray_serve_http_request_latency_ms"):
        assert prometheus.wait_for_at_least(f"sum({serve_histogram}_count)", CALLS) >= CALLS, serve_histogram
        # one query, one scrape: the health checks keep adding to both, and Ray's report can fall between a
        # flush's bucket and count records (actors/metrics.py), so they agree at some scrape, not at each
        apart = f'sum({serve_histogram}_bucket{{le="+Inf"}}) - sum({serve_histogram}_count)'
        assert prometheus.wait_for(apart, 0.0, timeout_s=30) == 0.0, serve_histogram
        median = prometheus.value(f"histogram_quantile(0.5, sum by (le) ({serve_histogram}_bucket))")
        assert median is not None and 0 < median < 10_000, (serve_histogram, median)  # ms
    assert not [
        name
        for name in prometheus.names()
        if name.startswith("ray_serve_") and name.endswith("_total") and "latency" in name
    ]

    # a key of a wallet without credits: one 402, counted by its cause
    refused = 'sum by (cause) (gateway_refusals_total{status="402"})'
    causes = {row["metric"]["cause"]: float(row["value"][1]) for row in prometheus.query(refused)}
    broke_wallet = Keypair()
    broke = Customer(broke_wallet, create_api_key(service.url, broke_wallet))
    status, doc, _ = post_json(service.url, {"jsonrpc": "2.0", "id": 1, "method": "getSlot"}, broke.headers)
    assert status == 402, doc
    total_402 = 'sum(gateway_refusals_total{status="402"})'
    assert prometheus.wait_for(total_402, sum(causes.values()) + 1) == sum(causes.values()) + 1
    now = {row["metric"]["cause"]: float(row["value"][1]) for row in prometheus.query(refused)}
    (cause,) = [c for c, v in now.items() if v != causes.get(c, 0.0)]
    assert cause in ("INSUFFICIENT_CREDITS", "PAYMENT_REQUIRED")

    # the actors' gauges, from their own processes
    assert (prometheus.value("max(gateway_deposit_watcher_last_poll_timestamp_seconds)") or 0) > time.time() - 300
    # (exported at whatever the package's earlier tests left: their receivers may be gone, their sends held)
    for gauge in ("max(gateway_webhook_queue_depth)", "max(gateway_send_holds_pending)"):
        depth = prometheus.wait_for_some(gauge)
        assert depth is not None and depth >= 0, gauge
    assert prometheus.value("max(gateway_signal_classifier_lag_slots)") is not None
    # gateway up airdrops the fee payer SOL on the devnode (docs/operations.md, The data dir)
    assert (prometheus.wait_for_some("min(gateway_x402_fee_payer_lamports)") or 0) > 0


def test_open_websockets_and_their_subscriptions_are_counted(
    service: RunningService, prometheus: Prometheus, customer: Customer
) -> None:
    """Two client subscriptions to slots on one socket share one subscription at the node."""
    ready(prometheus)
    api_key = customer.api_key
    url = service.url.replace("http://", "ws://") + "/ws"
    slots = 'sum(gateway_ws_subscriptions{method="slotSubscribe"})'
    gauges = ["sum(gateway_ws_connections)", slots, "sum(gateway_ws_upstream_subscriptions)"]
    connections, subscriptions, upstream = prometheus.settled(*gauges)  # the package's other tests' own

    async def hold_one_open() -> list[float | None]:
        async with connect(url, subprotocols=[f"auth.{api_key}", "solana-rpc"]) as ws:  # type: ignore[list-item]
            assert ws.subprotocol == "solana-rpc"
            seen = [await asyncio.to_thread(prometheus.wait_for, gauges[0], connections + 1)]
            for n in (1, 2):
                await ws.send(json.dumps({"jsonrpc": "2.0", "id": n, "method": "slotSubscribe"}))
            seen.append(await asyncio.to_thread(prometheus.wait_for, slots, subscriptions + 2))
            seen.append(await asyncio.to_thread(prometheus.wait_for, gauges[2], upstream + 1))
            return seen

    assert asyncio.run(hold_one_open()) == [connections + 1, subscriptions + 2, upstream + 1]
    assert prometheus.wait_for(gauges[0], connections) == connections
    assert prometheus.wait_for(slots, subscriptions) == subscriptions
    assert prometheus.wait_for(gauges[2], upstream) == upstream
    time.sleep(5)  # past Ray's gauge TTL (two export intervals, 2 s here): a gauge set once stays exported
    assert prometheus.value(gauges[0]) == connections


def test_grpc_streams_and_the_upstream_subscription_are_counted(
    service: RunningService, prometheus: Prometheus, customer: Customer, tmp_path: Path
) -> None:
    ready(prometheus)
    client = generate_client(tmp_path)
    token = (("x-token", customer.api_key),)
    streams = 'sum(gateway_requests_total{wire="grpc",method_class="stream",status="499"})'
    open_streams, ended = prometheus.settled("sum(gateway_grpc_streams)", streams)

    async def hold_one_stream() -> list[float | None]:
        async with grpc.aio.insecure_channel(f"127.0.0.1:{service.env['GATEWAY_GRPC_PORT']}") as channel:
            stream = client.grpc.GeyserStub(channel).Subscribe(metadata=token)
            await stream.write(client.pb2.SubscribeRequest(slots={"slots": client.pb2.SubscribeRequestFilterSlots()}))
            await stream.read()  # an update: the stream is open, and so is the server's at the node
            seen = [await asyncio.to_thread(prometheus.wait_for, "sum(gateway_grpc_streams)", open_streams + 1)]
            seen.append(await asyncio.to_thread(prometheus.wait_for, "max(gateway_grpc_upstream_connected)", 1.0))
            stream.cancel()
            return seen

    assert asyncio.run(hold_one_stream()) == [open_streams + 1, 1.0]
    assert prometheus.wait_for("sum(gateway_grpc_streams)", open_streams) == open_streams
    # the charged stream, ended by its client (CANCELLED: 499), is a call of wire grpc. At least one: a CI run
    # (default order, the other worker busy) once counted five more streams of the package's earlier clients
    # ending in this window, which a run of the package alone never did (not diagnosed: the note of issue 91)
    assert prometheus.wait_for_at_least(streams, ended + 1) >= ended + 1


def referenced_names(text: str) -> set[str]:
    return set(re.findall(r"\bgateway_[a-z0-9_]+", text))


def test_dashboard_and_alerts_name_only_exported_metrics(service: RunningService, prometheus: Prometheus) -> None:
    dashboard = json.loads((OPS / "grafana-dashboard.json").read_text())
    exprs = [target["expr"] for panel in dashboard["panels"] for target in panel["targets"]]
    assert exprs and all(referenced_names(expr) for expr in exprs), "a panel whose query names no gateway metric"
    wanted = referenced_names("\n".join(exprs)) | referenced_names((OPS / "alerts.yml").read_text())

    declared = set()
    for name, metric in declare_every_metric().items():
        suffixes = ("_bucket", "_count", "_sum") if metric.spec.kind is metrics.Kind.HISTOGRAM else ("",)
        declared |= {name + suffix for suffix in suffixes}
    assert wanted <= declared, (
        f"not declared (gateway/base/metrics.py, gateway/*/metrics.py): {sorted(wanted - declared)}"
    )

    expected = wanted - NOT_EXERCISED
    deadline = time.monotonic() + 60
    scraped = prometheus.names()
    while not expected <= scraped and time.monotonic() < deadline:
        time.sleep(1)
        scraped = prometheus.names()
    assert expected <= scraped, f"referenced but not in the scrape: {sorted(expected - scraped)}"
    assert not scraped & {f"ray_{name}" for name in wanted}, "the scrape config's rename did not apply"


def test_alert_rules_pass_promtool() -> None:
    promtool = shutil.which("promtool")
    assert promtool is not None, "Debian's prometheus package is not installed (.ci/run installs it)"
    for args in (["check", "rules", str(OPS / "alerts.yml")], ["check", "config", str(OPS / "prometheus.yml")]):
        done = subprocess.run([promtool, *args], capture_output=True, text=True, check=False, timeout=60)
        assert done.returncode == 0, done.stdout + done.stderr

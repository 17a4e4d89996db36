"""bench.metered's ratios to (b') (issue 64): throughput and machine CPU per request against
``forwarder-own``, within each round and within each short pair, and never between rows of two load
generators."""

from __future__ import annotations

import urllib.request
from pathlib import Path

import orjson
import psutil
import pytest

from bench.loadgen import DEFAULT_BODY, LoadResult
from bench.metered import (
    REFERENCE,
    against_reference,
    main,
    pair_error,
    pair_summary,
    same_client,
    start_edge,
    start_reference,
)
from bench.report import Row
from gateway.runtime.haproxy_edge import SUFFIX


def row(name: str, rps: float, machine_us: float, backend: str = "wrk", conns: int = 64) -> Row:
    node = {"replica": machine_us * 0.75, "HAProxy": machine_us * 0.25}
    result = LoadResult(
        url="http://127.0.0.1:1/", connections=conns, backend=backend, count=int(rps), duration_s=1.0, rps=rps,
        p50_ms=1.0, p99_ms=2.0, max_ms=3.0, node_cpu_us_per_req=node,
    )  # fmt: skip
    return Row(name, result)


def test_each_target_is_given_against_b_prime_in_throughput_and_machine_cpu() -> None:
    rounds = [
        [row(REFERENCE, 12_000, 120), row("serve-unmetered", 3_000, 400), row("forwarder", 6_000, 240)],
        [row(REFERENCE, 10_000, 130), row("serve-unmetered", 4_000, 390), row("forwarder", 5_000, 260)],
        [row(REFERENCE, 11_000, 125), row("serve-unmetered", 3_300, 500), row("forwarder", 5_500, 250)],
    ]
    lines = against_reference(rounds, 64)
    (unmetered,) = [line for line in lines if "serve-unmetered" in line]
    assert "throughput 0.300 (0.250 0.400 0.300)" in unmetered  # each round's own (b'), median of three
    assert "machine CPU per request 0.300 (0.300 0.333 0.250), 3.33x (b')'s" in unmetered
    assert any(line.startswith("  forwarder @64 conn: throughput 0.500") for line in lines)


def test_rows_of_two_load_generators_are_not_compared() -> None:
    rows = [row(REFERENCE, 12_000, 120), row("metered-signed", 1_000, 900, backend="python")]
    assert same_client(rows, "metered-signed", REFERENCE, 64) is None
    assert against_reference([rows], 64) == []
    keyed = row("metered-apikey-python", 1_500, 700, backend="python")
    pair = same_client([*rows, keyed], "metered-signed", "metered-apikey-python", 64)
    assert pair is not None and pair[1] is keyed


def test_a_short_pair_gives_its_ratios_as_the_median_of_its_pairs() -> None:
    of_rounds = [
        [(row(REFERENCE, 10_000, 100), row("metered-apikey", 5_000, 200))],
        [(row(REFERENCE, 8_000, 120), row("metered-apikey", 3_200, 300)),
         (row(REFERENCE, 9_000, 110), row("metered-apikey", 5_400, 165))],
    ]  # fmt: skip
    lines = pair_summary((REFERENCE, "metered-apikey"), of_rounds)
    assert lines[0] == (
        "3 short pairs, metered-apikey / forwarder-own @64 conn, throughput: median 0.500 (quartiles 0.400 – 0.600)"
    )
    assert lines[1].startswith("    each round's pairs: medians 0.500 0.500;")
    assert lines[2].startswith(
        "3 short pairs, metered-apikey / forwarder-own @64 conn, forwarder-own's machine CPU a request / its own:"
        " median 0.500 (quartiles 0.400 – 0.667)"
    )


@pytest.mark.parametrize(
    ("pair", "problem"),
    [
        (("metered-apikey", "metered-signed"), "run from the Python client"),  # wrk against the Python client
        (("forwarder-own", "metered-batch100"), "two different targets"),
        (("metered-apikey", "metered-apikey"), "two different targets"),
        (("forwarder-own",), "two different targets"),
    ],
)
def test_a_pair_of_two_load_generators_or_not_two_targets_is_refused(pair: tuple[str, ...], problem: str) -> None:
    refusal = pair_error(pair)
    assert refusal is not None and problem in refusal
    assert pair_error(("metered-apikey-python", "metered-signed")) is None
    assert pair_error((REFERENCE, "metered-apikey")) is None


def test_the_edge_target_is_refused_where_the_stack_runs_no_haproxy() -> None:
    with pytest.raises(SystemExit) as refused:
        main(["--only", "forwarder-own,app-uvicorn-edge", "--ingress-mode", "reuseport"])
    assert refused.value.code == 2
    assert pair_error((REFERENCE, "app-uvicorn-edge")) is None and pair_error((REFERENCE, "app-uvicorn-ray")) is None


@pytest.mark.timeout(120)
def test_the_edge_target_serves_through_a_second_haproxy_on_the_stacks_configuration(tmp_path: Path) -> None:
    """``app-uvicorn-edge``'s HAProxy: the stack's patched file (here one of the shape Ray writes: its admin
    socket, its front end, a replica and Serve's backup fallback) found under the stack's HAProxy directory,
    pointed at the given app, and run by Ray's bundled binary, which the real requests go through."""
    files = tmp_path / "stack-haproxy" / "session"
    files.mkdir(parents=True)
    (files / f"haproxy.cfg{SUFFIX}").write_text(
        "global\n    stats socket /nonexistent/admin.sock mode 600 level admin\n    maxconn 1000\n"
        "defaults\n    mode http\n    timeout connect 5s\n    timeout client 30s\n    timeout server 30s\n"
        "frontend http_frontend\n    bind 127.0.0.1:1\n    default_backend gateway\n"
        "backend gateway\n    option httpchk GET /-/healthz\n    server replica1 127.0.0.1:2 check\n"
        "    server fallback 127.0.0.1:3 backup\n"
    )
    workdir = tmp_path / "edge"
    workdir.mkdir()
    upstream, upstream_url = start_reference("bench.const_upstream")
    started = [upstream]
    try:
        edge, edge_url = start_edge(tmp_path / "stack-haproxy", upstream_url.rstrip("/"), workdir)
        started.append(edge)
        assert psutil.Process(edge.pid).name() == "haproxy"
        request = urllib.request.Request(f"{edge_url}/", data=DEFAULT_BODY)
        with urllib.request.urlopen(request, timeout=5) as answer:  # through HAProxy to the upstream
            assert orjson.loads(answer.read())["result"] == 123456
        written = (workdir / "haproxy.cfg").read_text()
        upstream_port = upstream_url.rstrip("/").rpartition(":")[2]
        assert f"server replica 127.0.0.1:{upstream_port} check" in written and "backup" not in written
        assert f"stats socket {workdir}/admin.sock" in written and "httpchk" not in written
    finally:
        for proc in started:
            proc.terminate()
            proc.wait(timeout=10)

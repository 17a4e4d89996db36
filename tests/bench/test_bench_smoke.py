"""Smoke test of the benchmark harness: it runs and counts; no timing is asserted."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import orjson
import pytest

from bench import ws_fanout
from bench.const_upstream import answer
from bench.gateway_overhead import measure, reference_servers
from bench.loadgen import run_load
from bench.report import format_ratios, format_table
from bench.ws_fanout import Options, Subscriber, format_latency, format_results, summarize_profile
from bench.ws_fanout import run as run_ws_fanout


def test_const_upstream_answers_echo_ids() -> None:
    assert orjson.loads(answer(b'{"jsonrpc":"2.0","id":7,"method":"getSlot"}')) == {
        "jsonrpc": "2.0",
        "result": 123456,
        "id": 7,
    }
    batch = orjson.loads(answer(b'[{"jsonrpc":"2.0","id":"a","method":"getHealth"},{"id":2,"method":"x"}]'))
    assert [item["id"] for item in batch] == ["a", 2]
    assert batch[0]["result"] == "ok"
    assert orjson.loads(answer(b"not json"))["error"]["code"] == -32700


async def test_loadgen_refuses_non_loopback() -> None:
    with pytest.raises(ValueError, match="non-loopback"):
        await run_load("http://192.0.2.1:8000/", duration_s=0.1, max_requests=1)


async def test_loadgen_refuses_a_rate_it_cannot_pace() -> None:
    with pytest.raises(ValueError, match="positive"):
        await run_load("http://127.0.0.1:9/", duration_s=0.1, rate=0.0, backend="python")
    with pytest.raises(ValueError, match="not paced"):
        await run_load("http://127.0.0.1:9/", duration_s=0.1, rate=100.0, backend="wrk")


@pytest.mark.timeout(120)
async def test_a_paced_run_never_sends_faster_than_its_rate() -> None:
    """Paced at 200 a second, the upstream (thousands a second closed-loop) gets at most the schedule's
    requests: no lower bound is asserted (that would be a timing assertion)."""
    async with reference_servers() as refs:
        result = await run_load(refs.upstream_url, connections=4, duration_s=1.0, warmup_s=0.2, rate=200.0)
    assert result.errors == {} and result.count > 0
    assert result.count <= 200 * (0.2 + 1.0) + 4, result.count


@pytest.mark.timeout(120)
async def test_harness_runs_against_upstream_and_forwarder() -> None:
    async with reference_servers() as refs:
        assert refs.forwarder_url is not None and refs.forwarder_pid is not None
        rows = await measure(
            {"upstream": refs.upstream_url, "forwarder": refs.forwarder_url},
            connections=(4,),
            duration_s=1.0,
            warmup_s=0.2,
            max_requests=50_000,
            backend="python",
            cpu_pids={"upstream": [refs.upstream_pid], "forwarder": [refs.forwarder_pid]},
            pause_s=0.0,
            log=None,
        )
    assert [row.name for row in rows] == ["upstream", "forwarder"]
    for row in rows:
        assert row.result.count > 0, row
        assert row.result.errors == {}, row
        assert row.result.rps > 0
    table = format_table(rows, baseline="forwarder")
    assert "forwarder" in table and "upstream" in table
    assert "forwarder / upstream @4 conn" in format_ratios(rows, [("forwarder", "upstream")])


def test_ws_fanout_client_counts_frames_split_anywhere() -> None:
    """The fan-out benchmark's subscribers only find frame boundaries: answers, notifications and pings
    cut at every byte still count right, and a ping is answered."""

    def server_frame(opcode: int, payload: bytes) -> bytes:
        n = len(payload)
        head = bytes((0x80 | opcode, n)) if n < 126 else bytes((0x80 | opcode, 126)) + n.to_bytes(2, "big")
        return head + payload

    note = b'{"jsonrpc":"2.0","method":"accountNotification","params":{"result":{"value":1},"subscription":7}}'
    wire = server_frame(1, b'{"jsonrpc":"2.0","result":7,"id":1}') + server_frame(9, b"hi")
    wire += server_frame(1, note) + server_frame(1, note + b" " * 200) + server_frame(8, (1000).to_bytes(2, "big"))

    class Transport:
        def __init__(self) -> None:
            self.written: list[bytes] = []

        def write(self, data: bytes) -> None:
            self.written.append(data)

        def is_closing(self) -> bool:
            return False

    async def count(cut: int) -> tuple[int, int | None, list[bytes]]:
        sub = Subscriber(b"GET", b"SUB", deflate=False)
        transport = Transport()
        sub.connection_made(transport)  # type: ignore[arg-type]
        response = b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\n\r\n" + wire
        sub.data_received(response[:cut])
        sub.data_received(response[cut:])
        assert sub.subscribed.done()
        return sub.count, sub.close_code, transport.written

    for cut in range(0, 60 + len(wire), 7):
        counted, code, written = asyncio.run(count(cut))
        assert (counted, code) == (2, 1000), cut
        assert written[:2] == [b"GET", b"SUB"]
        pong = written[2]
        assert pong[0] == 0x8A and pong[1] == 0x80 | 2  # a masked pong of the ping's 2 bytes
        assert bytes(b ^ pong[2 + i % 4] for i, b in enumerate(pong[6:])) == b"hi"


def test_ws_fanout_profile_summary(tmp_path: Path) -> None:
    raw = tmp_path / "profile.txt"
    session = Path(ws_fanout.REPO_ROOT, "gateway/pubsub/session.py")
    raw.write_text(
        f"_run_module_as_main (<frozen runpy>:198);WsSession._notify ({session}:1) 3\n"
        f"main (x.py:1);__init__ (<string>:2) 1\n"
    )
    text = summarize_profile(raw, us_per_note=40.0)
    assert "4 samples" in text
    assert "75.0%  30.0 µs  fan-in" in text


@pytest.mark.timeout(240)
def test_ws_fanout_runs_both_targets_and_times_signals() -> None:
    options = Options(subscribers=3, duration_s=1.0, warmup_s=1.0, rates=(10.0,), signals=2, feed_interval_ms=100)
    results = run_ws_fanout(options)
    assert [r.target for r in results.measurements] == ["gateway", "baseline"]
    for r in results.measurements:
        assert r.delivered > 0 and len(r.per_subscriber) == 3 and r.closes == {}, r
        assert r.offered_per_s > 0
    assert "gateway / baseline" in format_results(results.measurements, options)
    assert results.latency is not None and len(results.latency.from_confirmed) == 2
    assert all(0 < s < 30 for s in results.latency.from_confirmed)
    assert "p99" in format_latency(results.latency)


@pytest.mark.timeout(300)
def test_grpc_stream_bench_runs_both_targets_and_times_slots(database_url: str, redis_url: str) -> None:
    from bench import grpc_stream

    options = grpc_stream.Options(
        streams=3,
        rates=(20.0,),
        duration_s=1.0,
        warmup_s=0.5,
        slots_s=1.5,
        recorded=20,
        database_url=database_url,
        redis_url=redis_url,
    )
    results = grpc_stream.run(options)
    assert [r.target for r in results.throughput] == ["gateway", "baseline"]
    for r in results.throughput:
        assert r.delivered > 0 and r.errors == [] and r.latencies, r
    assert [r.target for r in results.latency] == ["gateway", "baseline"]
    for r in results.latency:
        assert r.delivered > 0 and r.errors == [] and all(0 < s < 5 for s in r.latencies), r
    report = grpc_stream.format_results(results, options)
    assert "gateway / baseline per round:" in report and "slot -> client" in report


def test_the_forwarder_bench_answers_every_call(capsys: pytest.CaptureFixture[str]) -> None:
    """The bench raises when the forwarder's last reply is not 200 with an answer for every item."""
    from bench import forward_cpu

    forward_cpu.main(["--calls", "50", "--rounds", "1"])
    out = capsys.readouterr().out
    assert "getSlot" in out and "batch of 100" in out
    with pytest.raises(SystemExit):
        forward_cpu.main(["--calls", "0"])


def test_the_pool_owner_bench_prints_its_share(capsys: pytest.CaptureFixture[str]) -> None:
    from bench import pool_owner

    pool_owner.main(["--nodes", "2", "--seconds", "1"])
    assert "pool owner, 2 nodes, 1 s at rest: " in capsys.readouterr().out


@pytest.mark.timeout(240)
def test_webhook_bench_delivers_every_job_both_ways(capsys: pytest.CaptureFixture[str]) -> None:
    """The bench raises when the receiver's count differs from the jobs posted (either target)."""
    from bench import webhooks as webhook_bench

    webhook_bench.main(["--jobs", "300", "--webhooks", "4", "--concurrency", "8", "--rounds", "2", "--backlog", "200"])
    out = capsys.readouterr().out
    assert "dispatcher / plain: median of rounds" in out
    assert "| dispatcher |" in out and "| plain |" in out
    assert "the backlog (all due) drained in" in out


def test_signed_headers_are_made_ahead_and_each_used_once() -> None:
    from bench.metered import Presigned
    from gateway.core.signing import signing_message
    from gateway.core.wallet_headers import HeaderFailure, parse_wallet_headers, verify_signature
    from gateway_client import WalletSigner

    body = b'{"jsonrpc":"2.0","id":1,"method":"getSlot"}'
    presigned = Presigned(WalletSigner(bytes(range(32))), body)
    presigned.fill(3 / Presigned.PER_S)  # three made ahead
    sent = [{k.lower(): v for k, v in presigned().items()} for _ in range(5)]
    assert presigned.live == 2  # the two past them were signed as they went
    assert len({h["x-nonce"] for h in sent}) == 5
    for headers in sent:
        parsed = parse_wallet_headers(headers, time.time())
        assert not isinstance(parsed, HeaderFailure)
        message = signing_message("POST", "/", parsed.timestamp, parsed.nonce, body).encode()
        assert verify_signature(parsed.pubkey_bytes, message, parsed.signature)


@pytest.mark.parametrize("client", ["aiohttp", "gateway"])
async def test_the_forwarder_forwards_through_either_node_client(client: str) -> None:
    """bench.metered's two references: the plain forwarder (b) over aiohttp, and over the gateway's own node
    client (forwarder-own); both hand the upstream's answer back unchanged, and 502 when it is gone."""
    import aiohttp

    from bench.const_upstream import serve_const_upstream
    from bench.forwarder import serve_forwarder

    body = b'{"jsonrpc":"2.0","id":7,"method":"getSlot"}'
    async with (
        serve_const_upstream() as upstream,
        aiohttp.ClientSession() as http,
        serve_forwarder(upstream, client=client) as url,
        http.post(url, data=body, headers={"Content-Type": "application/json"}) as resp,
    ):
        assert resp.status == 200
        assert orjson.loads(await resp.read()) == orjson.loads(answer(body))
    async with (
        aiohttp.ClientSession() as http,
        serve_forwarder("http://127.0.0.1:9/", client=client) as url,
        http.post(url, data=body) as resp,
    ):
        assert resp.status == 502

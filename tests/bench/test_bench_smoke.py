"""Smoke test of the benchmark harness: it runs and counts; no timing is asserted."""

from __future__ import annotations

import orjson
import pytest

from bench.const_upstream import answer
from bench.gateway_overhead import measure, reference_servers
from bench.loadgen import run_load
from bench.report import format_ratios, format_table


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

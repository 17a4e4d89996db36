"""The CI-cheap per-request CPU benchmark of the in-process request path (``bench.pipeline_cpu``): a short
run on every ``make test``, its figures printed with the test's output. No time is asserted (the machine
is shared); it fails only when a pipeline stops answering or the benchmark stops running."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench import pipeline_cpu


@pytest.mark.timeout(300)
@pytest.mark.parametrize("cold", [False, True], ids=["warm", "cold"])
async def test_pipeline_cpu_runs_and_prints_its_figures(
    database_url: str, redis_url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str], cold: bool
) -> None:
    figures = await pipeline_cpu.measure(
        tmp_path, database_url, redis_url, calls=400, rounds=1, profile=None, sort="tottime", cold=cold
    )
    assert set(figures) == {
        "unmetered",
        "metered-apikey",
        "metered-signed",
        "asgi-unmetered",
        "asgi-metered-apikey",
        "metered-batch100",
    }
    assert all(us > 0 for us in figures.values()), figures
    with capsys.disabled():  # printed in make test's output, not captured
        caches = "the CPU caches overwritten before each call" if cold else "calls back to back"
        print(f"\nbench.pipeline_cpu (in process, CPU per call, 400 calls, {caches}; no timing asserted):")
        print(pipeline_cpu.format_figures(figures))


@pytest.mark.timeout(300)
async def test_the_ladder_follows_the_served_stages_and_prints_its_rows(
    database_url: str, redis_url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``--ladder``: every row answers the API-key call (per_call_us asserts a 200), in the order of
    ``GatewayApp.rpc_stages()``, with the floor beside metering; no time is asserted."""
    figures = await pipeline_cpu.measure(
        tmp_path, database_url, redis_url, calls=400, rounds=1, profile=None, sort="tottime", with_ladder=True
    )
    assert list(figures) == [
        "boundary+parse",
        "+auth",
        "+headers,readiness",
        "+access rules",
        "+floor meter",
        "+metering",
    ]
    assert all(us > 0 for us in figures.values()), figures
    with capsys.disabled():
        print("\nbench.pipeline_cpu --ladder (in process, CPU per call, 400 calls; no timing asserted):")
        print(pipeline_cpu.format_ladder(figures))

"""Rate and concurrency owned by real account-shard Ray actors, shared by 1, 2 and 4 replicas' limiters,
and a shard killed mid-run. The replicas and the actors run in a Ray driver of its own
(tests/limits/shard_driver.py: Ray in the test process breaks beside the in-process devnode); this
test checks what it saw.

The tolerance (gateway/limits/shards.py): the calls admitted by all replicas together in any window of W
seconds are at most ``burst + rps * W`` (burst = rps, as for one process), across a shard's restart
too. One client gets its full rate wherever its calls land: at least ``rps * duration`` (the rate less
the burst: what the replica-local shares gave one replica, ``rps / replicas``, is far below it).
"""

from __future__ import annotations

import asyncio
import bisect
import json
import sys
from pathlib import Path
from typing import Any

import pytest

REPO_ROOT = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.slow


def max_in_window(times: list[float], window: float) -> int:
    return max((bisect.bisect_right(times, t + window) - i for i, t in enumerate(times)), default=0)


def assert_within_the_bound(admitted: list[float], rps: int, duration: float) -> None:
    for window in (0.0, 0.1, 0.5, 1.0, duration):
        assert max_in_window(admitted, window) <= rps + rps * window, (window, max_in_window(admitted, window))


@pytest.fixture(scope="module")
async def seen() -> dict[str, Any]:
    driver = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "tests.limits.shard_driver",
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        cwd=str(REPO_ROOT),
    )
    out, err = await asyncio.wait_for(driver.communicate(), 240)
    assert driver.returncode == 0, err.decode()[-3000:]
    doc: dict[str, Any] = json.loads(out.decode().strip().splitlines()[-1])
    return doc


@pytest.mark.parametrize("replicas", [1, 2, 4])
@pytest.mark.parametrize("spread", ["even", "skewed"])
async def test_one_client_gets_its_full_rate_and_never_more(seen: dict[str, Any], replicas: int, spread: str) -> None:
    run, rps = seen[f"rate-{replicas}-{spread}"], seen["rps"]
    assert_within_the_bound(run["admitted"], rps, run["duration"])
    assert len(run["admitted"]) >= rps * run["duration"], (len(run["admitted"]), run["duration"])


@pytest.mark.parametrize("replicas", [1, 4])
async def test_a_burst_at_once_gets_the_whole_burst_and_never_more(seen: dict[str, Any], replicas: int) -> None:
    """Calls arriving together at replicas that hold nothing yet: the account's whole burst is admitted
    (their demands add up in the exchanges), and no more than the burst plus what refilled meanwhile."""
    run, rps = seen[f"burst-{replicas}"], seen["rps"]
    assert rps <= run["ok"] <= rps + rps * run["duration"] + 1, run
    assert run["outcomes"] == ["ok", "rate"]


async def test_full_concurrency_on_one_replica_or_spread_and_never_more(seen: dict[str, Any]) -> None:
    conc, slots = seen["concurrency"], 8
    assert conc["one_replica_holds"] == slots  # the whole budget on one replica, and not one more
    assert conc["one_replica_others"] == ["concurrency"] * 3  # none left for the others
    assert conc["spread_holds"] == slots  # two on each of four replicas
    assert conc["spread_more"] == ["concurrency"] * 4


async def test_many_concurrent_callers_across_replicas_never_exceed_the_limits(seen: dict[str, Any]) -> None:
    many = seen["concurrency"]["many"]
    assert 1 < many["most_in_flight"] <= 8  # CONCURRENCY of tests/limits/shard_driver.py
    assert_within_the_bound(many["admitted"], 400, many["duration"])


async def test_a_killed_shard_refuses_until_it_is_back_and_never_over_admits(seen: dict[str, Any]) -> None:
    run, rps = seen["kill"], seen["rps"]
    assert_within_the_bound(run["admitted"], rps, run["duration"])
    outcomes = run["outcomes"]
    killed_at = next(t for t, what in outcomes if what == "killed")
    after = [what for t, what in outcomes if t > killed_at]
    assert "unavailable" in after  # refused 503 (what it had granted spent first), not admitted unmetered
    assert after[-1] == "ok"  # restarted by Ray, and admitting again
    assert len(run["admitted"]) >= rps * killed_at  # the full rate before the kill


async def test_slots_in_flight_when_a_shard_restarts_are_still_counted(seen: dict[str, Any]) -> None:
    kill = seen["kill_slots"]
    assert kill["held"] == 8
    assert set(kill["while_held"]) <= {"concurrency", "unavailable"} and kill["while_held"][-1] == "concurrency"
    assert kill["after_release"] == "ok"

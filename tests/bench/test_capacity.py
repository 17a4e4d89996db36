"""bench/capacity: the model's arithmetic, and the measuring code counting what it should (no timing
is asserted)."""

from __future__ import annotations

import math
import time
from pathlib import Path

import pytest

from bench.capacity import Figure, ledger, model
from bench.capacity.shards import Traffic
from gateway.limits.shards import ShardBook
from tests.databases import drop_database, fresh_database

COSTS = model.Costs(
    exchange_us=300,
    exchange_caller_us=350,
    lease_us=220,
    lease_caller_us=150,
    settle_us=400,
    settle_caller_us=250,
    settle10_us=480,
    settle10_caller_us=290,
    release_us=260,
    release_caller_us=200,
    claim_us=7,
    lookup_us=6,
)


def test_a_call_on_an_idle_slice_costs_a_fill_and_a_give_back() -> None:
    assert model.exchanges_per_call(0.0) == 2.0
    assert model.exchanges_per_call(2.0) == pytest.approx(2 * math.exp(-0.6))


def test_rows_per_settle_and_their_cost() -> None:
    assert model.rows_per_settle(0.0, 1.0) == 1.0
    assert model.rows_per_settle(1e-9, 1.0) == pytest.approx(1.0)
    assert model.rows_per_settle(100.0, 1.0) == pytest.approx(100.0)
    assert model.settle_cost(400, 480, 2) == 400
    assert model.settle_cost(400, 480, 10) == 480
    assert model.settle_cost(400, 480, 1) == 390


def test_ledger_rates_at_the_extremes() -> None:
    leases, settles, releases = model.ledger_rates(1e-6, 1.0, 1.0)  # a call now and then: three transactions each
    assert leases / 1e-6 == pytest.approx(1.0, rel=1e-3)
    assert settles / 1e-6 == pytest.approx(1.0, rel=1e-3)
    assert releases == leases
    leases, settles, _ = model.ledger_rates(100.0, 1.0, 1.0)  # a busy pair: a settle a flush, a lease per 10 calls
    assert settles == pytest.approx(1.0)
    assert leases == pytest.approx(10.0)


def test_the_plan_is_a_fixed_point_and_affinity_cuts_the_ledger() -> None:
    spread = model.plan(model.Workload(), COSTS)
    assert model.plan_for(model.Workload(), COSTS, spread.replicas).replicas == spread.replicas
    assert spread.per_pair == pytest.approx(2.0 / spread.replicas)
    kept = model.plan(model.Workload(affinity=True), COSTS)
    assert kept.per_pair == 2.0
    assert kept.leases + kept.settles < (spread.leases + spread.settles) / 2
    assert kept.replicas < spread.replicas
    assert "as built" in model.report(model.Workload(), COSTS)


def test_traffic_gives_back_under_the_lease_it_was_granted() -> None:
    """Every give-back is counted by the book (same lease): what is outstanding is the slices still held."""
    book, traffic = ShardBook("test"), Traffic(accounts=500, holders=3, lag=16)
    for _ in range(5_000):
        key, request = traffic.next_request()
        traffic.answered(key, request, book.exchange(request, time.monotonic()))
    outstanding = sum(acct.outstanding for acct in book._accounts.values())
    assert outstanding == 5 * len(traffic.held)
    assert 16 <= len(traffic.held) <= 18


def test_figure_per_core() -> None:
    figure = Figure("s", "n", count=1_000, seconds=0.5, caller_cpu_s=0.2, server_cpu_s=0.25, load=1.0)
    assert figure.rate == 2_000
    assert figure.server_us == 250
    assert figure.per_server_core == 4_000
    assert figure.caller_us == 200


@pytest.mark.timeout(120)
async def test_ledger_section_runs_the_real_functions(database_url: str, data_home: Path) -> None:
    url = await fresh_database(database_url, "capacity")
    try:
        figures, settings = await ledger.measure(url, data_home / "postgres", 0.2, accounts=50)
    finally:
        await drop_database(url)
    assert "fsync=" in settings
    assert [f.name for f in figures][-2:] == [
        "settle of 10 usage rows, 16 connection(s)",
        "settle releasing the lease, 4 connection(s)",
    ]
    for figure in figures:
        assert figure.count > 0, figure
        assert figure.server_cpu_s is not None and figure.server_cpu_s >= 0, figure
    leased = sum(f.count for f in figures if f.name.startswith("lease grant"))
    assert figures[-1].count == leased  # every lease granted was released

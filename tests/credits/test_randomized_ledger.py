"""The seeded randomized ledger run (tests/faults/ledger_run.py) at 3,000 metered operations, on the
session's real PostgreSQL (a database of its own): deposits, calls, sends, webhook deliveries, expiries,
replicas killed mid-flush and every connection terminated at random points, then the conservation
audit of every account and the model check. ``make faults`` runs it at 10^5."""

from __future__ import annotations

from tests.faults.ledger_run import plan, run_on


def test_the_plan_is_the_seeds() -> None:
    def steps(seed: int) -> list[tuple[str, object]]:
        made = plan(seed, replicas=4, accounts=36)
        return [(s.kind, s.args) for s, _ in zip(made, range(5_000), strict=False)]

    assert steps(7) == steps(7)
    assert steps(7) != steps(8)


async def test_randomized_ledger_run(database_url: str) -> None:
    report = await run_on(database_url, operations=3_000, seed=11)
    print("\n".join(report.lines()))
    assert report.problems == []
    assert report.total >= 3_000
    assert report.audited_ok == report.accounts == 36
    assert report.crashes["replica killed"] + report.crashes["replica killed mid-flush"] > 0
    assert report.crashes["connections terminated"] > 0
    assert report.consumed == report.model_charged - report.unbilled

"""Smoke test of ``bench/grpc_churn.py``: it runs tiny against the real server and counts; no timing is asserted."""

from __future__ import annotations

import pytest

from bench import grpc_churn


@pytest.mark.timeout(300)
def test_grpc_churn_bench_alternates_phases_and_counts_changes(database_url: str, redis_url: str) -> None:
    options = grpc_churn.Options(
        holders=2,
        holder_streams=2,
        keys=400,
        churn_streams=2,
        greedy=1,
        churn_keys=300,
        rounds=2,
        phase_s=4.0,
        settle_s=0.5,
        warmup_s=0.5,
        database_url=database_url,
        redis_url=redis_url,
    )
    results = grpc_churn.run(options)

    # The holders' streams took their keys and stayed open; the churn tenant's streams opened at set-up.
    assert results.held["streams"] == 4 and results.held["keys"] == 4 * 200
    assert results.held["open_at_end"] == 4 and results.held["ended"] == []
    assert results.held["churn"] == 3
    # The probe timed one change's stages with the server's code.
    assert results.probe is not None and set(results.probe) == {"parse", "compile", "budget", "fan-out"}
    # Two rounds, each a phase without churn and one with it, in alternating order.
    assert [(p.round, p.churn) for p in results.phases] == [(0, False), (0, True), (1, True), (1, False)]
    for phase in results.phases:
        assert phase.latencies and phase.victim_errors == [], phase
        assert all(0 < s < 30 for s in phase.latencies)
        assert len(phase.at) == len(phase.latencies) and all(0 <= t < 30 for t in phase.at)
        assert (phase.changes != {}) is phase.churn
    for phase in (p for p in results.phases if p.churn):
        for kind, tally in phase.changes.items():
            # every change sent is accounted for: acknowledged, refused, lost after a refusal, or unanswered
            assert tally["sent"] == tally["accepted"] + tally["refused"] + tally["lost"] + tally["unanswered"], kind
        paced, greedy = phase.changes["paced"], phase.changes["greedy"]
        assert paced["sent"] >= 2 and paced["accepted"] >= 1
        # twice the allowed rate for seconds past the burst: the server refuses it, by the stream's change rate or
        # the account's key rate, whichever runs out first (docs/api.md, gRPC limits)
        refusals = greedy.get("why:filter change rate", 0) + greedy.get("why:filter key rate", 0)
        assert greedy["refused"] >= 1 and refusals >= 1

    report = grpc_churn.format_results(results, options)
    assert "with / without churn, median of the rounds' ratios" in report
    assert "with churn, pooled: the phases' first" in report
    assert "churn tenant, paced streams:" in report and "churn tenant, greedy streams:" in report

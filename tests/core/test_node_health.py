"""The pool's health rules (gateway/core/node_health.py): which nodes serve, why the others do not, and
the circuit breaker that keeps a flapping node out. Pure: probes and tallies are built by hand."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from gateway.core.node_health import (
    EDGES,
    NodeState,
    Probe,
    Tally,
    Thresholds,
    Window,
    bucket_of,
    judge,
    quantile,
    view_of,
)
from gateway.core.upstreams import Role, Tier, UpstreamNode

TH = Thresholds()
GENESIS = "4uhcVJyU9pJkvQyS88uRDiswHXSCkY3zQawwpjk2NsNY"


def node(name: str, tier: Tier = Tier.PRIMARY, roles: tuple[Role, ...] = ()) -> UpstreamNode:
    return UpstreamNode(name=name, rpc_url=f"http://{name}.example:8899", tier=tier, roles=roles)


def good(at: float, slot: int = 1_000, genesis: str = GENESIS, health: str | None = None) -> Probe:
    return Probe(
        at, 0.002, health=health, slots=(slot, slot - 1, slot - 2), heights=(slot - 10, slot - 11, slot - 12),
        max_shred_slot=slot, genesis=genesis, version="2.3.0",
    )  # fmt: skip


def failed(at: float) -> Probe:
    return Probe(at, 1.0, failure="no answer within 1 s")


def states(*names: str) -> list[NodeState]:
    return [NodeState(node(n)) for n in names]


def probe_all(pool: list[NodeState], at: float, slots: dict[str, int] | None = None) -> None:
    for s in pool:
        s.record_probe(good(at, (slots or {}).get(s.node.name, 1_000)))


def test_a_node_of_another_cluster_never_serves() -> None:
    pool = states("a", "b", "c")
    probe_all(pool, 1.0)
    pool[2].record_probe(good(1.0, genesis="5eykt4UsFv8P8NJdTREpY1vzqKqZKvdpKuc147dw2N9d"))
    assert judge(pool, 1.0, TH) == GENESIS  # the majority's
    assert [s.in_service for s in pool] == [True, True, False]
    assert pool[2].reason.startswith("another cluster: genesis 5eykt4")


def test_lag_behind_the_best_takes_a_node_out() -> None:
    pool = states("a", "b")
    probe_all(pool, 1.0, {"a": 1_000, "b": 1_000 - TH.max_lag_slots})
    judge(pool, 1.0, TH)
    assert [s.in_service for s in pool] == [True, True]  # exactly at the bound: in
    probe_all(pool, 1.3, {"a": 1_001, "b": 1_000 - TH.max_lag_slots})
    judge(pool, 1.3, TH)
    assert [s.in_service for s in pool] == [True, False] and pool[1].reason == "behind by 26 slots"


def test_a_stale_probe_does_not_set_the_best_slot() -> None:
    """A hung node's last slot ages out of the best: it does not make live nodes look behind."""
    pool = states("a", "b")
    pool[0].record_probe(good(1.0, 2_000))
    pool[1].record_probe(good(10.0, 1_500))
    judge(pool, 10.0, TH)
    assert pool[1].in_service and pool[1].reason == ""


def test_catching_up_and_unhealthy_take_a_node_out() -> None:
    pool = states("a", "b", "c")
    probe_all(pool, 1.0)
    pool[1].record_probe(Probe(1.0, 0.002, slots=(1_000, 999, 998), heights=(1, 1, 1), max_shred_slot=1_101,
                               genesis=GENESIS))  # fmt: skip
    pool[2].record_probe(good(1.0, health="Node is behind by 150 slots"))
    judge(pool, 1.0, TH)
    assert [s.in_service for s in pool] == [True, False, False]
    assert pool[1].reason.startswith("catching up: 101 slots")
    assert pool[2].reason == "unhealthy: Node is behind by 150 slots"


def test_two_failed_probes_take_a_node_out_one_does_not() -> None:
    pool = states("a", "b")
    probe_all(pool, 1.0)
    judge(pool, 1.0, TH)
    pool[1].record_probe(failed(1.3))
    judge(pool, 1.3, TH)
    assert pool[1].in_service
    pool[1].record_probe(failed(1.6))
    judge(pool, 1.6, TH)
    assert not pool[1].in_service and pool[1].reason == "not answering: no answer within 1 s"


def test_calls_that_all_failed_take_a_node_out_at_once() -> None:
    pool = states("a", "b")
    probe_all(pool, 1.0)
    judge(pool, 1.0, TH)
    tally = Tally()
    for _ in range(TH.failing_calls):
        tally.record(0.001, "transport")
    pool[1].window.add(1.1, tally)
    judge(pool, 1.2, TH)
    assert not pool[1].in_service and pool[1].reason == "its last 3 calls failed (3 transport)"


def test_an_error_rate_over_the_bound_takes_a_node_out() -> None:
    pool = states("a", "b")
    probe_all(pool, 80.0)
    judge(pool, 80.0, TH)  # both serve: a node's calls judge it while it serves
    probe_all(pool, 100.0)
    tally = Tally()
    for i in range(40):
        tally.record(0.002, "http" if i % 3 else None)
    pool[1].window.add(90.0, tally)  # outside the last two seconds, inside the window
    judge(pool, 100.0, TH)
    assert not pool[1].in_service and pool[1].reason.startswith("failing 65% of calls (26 http)")


def test_a_node_far_slower_than_its_peers_leaves_service() -> None:
    pool = states("a", "b", "c")
    probe_all(pool, 80.0)
    judge(pool, 80.0, TH)
    probe_all(pool, 100.0)
    for s, seconds in zip(pool, (0.004, 0.005, 0.9), strict=True):
        tally = Tally()
        for _ in range(TH.min_calls):
            tally.record(seconds)
        s.window.add(95.0, tally)
    judge(pool, 100.0, TH)
    assert [s.in_service for s in pool] == [True, True, False]
    assert pool[2].reason.startswith("slow: p50 ") and "against its peers'" in pool[2].reason


def test_the_breaker_keeps_a_node_out_ten_seconds_and_three_good_probes() -> None:
    pool = states("a", "b")
    probe_all(pool, 0.0)
    judge(pool, 0.0, TH)
    pool[1].cordoned = "maintenance"
    judge(pool, 0.1, TH)
    assert not pool[1].in_service and pool[1].reason == "cordoned: maintenance"
    pool[1].cordoned = None
    for i in range(1, 4):  # three good probes, but the 10 s are not over
        probe_all(pool, 0.1 + i)
        judge(pool, 0.1 + i, TH)
    assert not pool[1].in_service and pool[1].reason.startswith("recovering: back after 7 s")
    probe_all(pool, 10.2)
    judge(pool, 10.2, TH)
    assert pool[1].in_service and pool[1].reason == ""


def test_a_flapping_node_restarts_its_count_of_good_probes() -> None:
    pool = states("a", "b")
    probe_all(pool, 0.0)
    judge(pool, 0.0, TH)
    pool[1].record_probe(failed(0.1))
    pool[1].record_probe(failed(0.2))
    judge(pool, 0.2, TH)
    for at in (11.0, 11.3):
        probe_all(pool, at)
        judge(pool, at, TH)
    pool[1].record_probe(failed(11.6))
    judge(pool, 11.6, TH)
    probe_all(pool, 11.9)
    judge(pool, 11.9, TH)
    assert not pool[1].in_service and pool[1].reason == "recovering: back after 2 more good probes"


def test_a_node_alone_in_a_role_comes_back_at_its_first_good_probe() -> None:
    """Nothing better exists: a pool of one does not stay down 10 s after a blip."""
    pool = states("only")
    probe_all(pool, 0.0)
    judge(pool, 0.0, TH)
    for at in (0.3, 0.6):
        pool[0].record_probe(failed(at))
    judge(pool, 0.6, TH)
    assert not pool[0].in_service
    probe_all(pool, 0.9)
    judge(pool, 0.9, TH)
    assert pool[0].in_service


def test_the_view_serves_fallbacks_only_when_no_primary_is_in_service() -> None:
    pool = [NodeState(node("p")), NodeState(node("f", Tier.FALLBACK))]
    probe_all(pool, 1.0)
    genesis = judge(pool, 1.0, TH)
    view = view_of(pool, 1, genesis, 1.0, TH)
    assert [v.name for v in view.serving(Role.READS)] == ["p"]
    pool[0].cordoned = "x"
    judge(pool, 1.1, TH)
    view = view_of(pool, 2, genesis, 1.1, TH)
    assert [v.name for v in view.serving(Role.READS)] == ["f"] and view.best() is view.nodes[1]
    assert view.nodes[0].summary()["state"] == "cordoned"


def test_a_nodes_summary_never_holds_its_urls_or_headers() -> None:
    secret = UpstreamNode(
        name="provider", rpc_url="https://rpc.example/?api-key=SECRET1", headers={"x-api-key": "SECRET2"},
        ws_url="wss://rpc.example/?api-key=SECRET3", grpc_url="https://grpc.example", grpc_token="SECRET4",
    )  # fmt: skip
    state = NodeState(secret)
    state.record_probe(good(1.0))
    judge([state], 1.0, TH)
    view = view_of([state], 1, GENESIS, 1.0, TH)
    assert "SECRET" not in repr(secret) and "SECRET" not in str(view.nodes[0].summary())
    assert "SECRET" not in repr(view)


@given(st.lists(st.floats(min_value=0.0001, max_value=40.0), min_size=1, max_size=200))
def test_quantiles_are_within_one_bucket(samples: list[float]) -> None:
    tally = Tally()
    for s in samples:
        tally.record(s)
    ordered = sorted(samples)
    for q in (0.5, 0.99):
        exact = ordered[max(0, int(q * len(ordered) + 0.999999) - 1)]
        got = quantile(tally.latency, q)
        assert got is not None and got >= exact and bucket_of(got) <= bucket_of(exact) + 1


def test_the_window_forgets_what_is_older_than_it() -> None:
    window = Window()
    old, new = Tally(), Tally()
    old.record(0.1, "timeout")
    new.record(0.1)
    window.add(10.0, old)
    window.add(45.0, new)
    totals = window.totals(45.5)
    assert (totals.calls, totals.failed) == (1, 0)
    assert len(EDGES) + 1 == len(totals.latency)


def test_a_node_back_in_service_is_judged_on_what_it_did_since() -> None:
    """The calls that failed while it was down (reported late too) do not take it out again before it served:
    the breaker, once closed, counts anew."""
    pool = states("only")
    probe_all(pool, 0.0)
    judge(pool, 0.0, TH)
    down = Tally()
    for _ in range(2 * TH.min_calls):
        down.record(0.001, "transport")
    pool[0].window.add(5.0, down)
    pool[0].record_probe(failed(5.0))
    pool[0].record_probe(failed(5.5))
    judge(pool, 5.5, TH)
    assert not pool[0].in_service
    probe_all(pool, 6.0)
    judge(pool, 6.0, TH)
    assert pool[0].in_service
    pool[0].window.add(5.9, down)  # a process's report of calls made before the return, received after it
    since = Tally()
    for _ in range(TH.min_calls):
        since.record(0.002)
    pool[0].window.add(6.1, since)
    judge(pool, 6.2, TH)
    assert pool[0].in_service and pool[0].totals.failed == 0, pool[0].reason

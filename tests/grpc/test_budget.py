"""The filter budget (gateway.grpc.budget), pure: what it counts is what the union asks the node for, each
account gets a share, and only the stream that would exceed is refused, with the kind, count and limit."""

from __future__ import annotations

import os

from gateway.grpc.budget import FilterBudget
from gateway.grpc.rules import StreamLimits, account_share
from geyser_proto import geyser_pb2 as pb
from geyser_proto.fanout import union_request
from geyser_proto.filters import Filters, b58encode, compile_request

LIMITS = StreamLimits(max_filters=8, account_filters=4)


def accounts(*keys: bytes, **extra: object) -> Filters:
    """One account filter per key (named after it), plus ``extra`` request fields."""
    named = {f"k{key.hex()[:8]}": pb.SubscribeRequestFilterAccounts(account=[b58encode(key)]) for key in keys}
    return compile_request(pb.SubscribeRequest(accounts=named, **extra))  # type: ignore[arg-type]


def keys(count: int) -> list[bytes]:
    return [os.urandom(32) for _ in range(count)]


def test_an_accounts_share_is_checked_over_its_streams_and_shared_filters_count_once() -> None:
    budget = FilterBudget(LIMITS)
    four = keys(4)
    assert budget.claim("s1", "alice", accounts(*four)) is None
    assert budget.claim("s2", "alice", accounts(*four[:2])) is None  # the same filters again: nothing new
    assert budget.used("alice") == (4, 0) and budget.used() == (4, 0)
    refused = budget.claim("s3", "alice", accounts(*keys(1)))
    assert refused is not None
    assert "this account's streams on this server would use 5 distinct `accounts` filters" in refused
    assert "at most 4 per account" in refused
    assert budget.used("alice") == (4, 0)  # a refusal changes nothing
    assert budget.claim("b1", "bob", accounts(*four)) is None  # bob's filters are his own, even alice's
    assert budget.used() == (4, 0) and budget.used("bob") == (4, 0)


def test_one_account_cannot_take_the_budget_and_the_process_limit_names_its_numbers() -> None:
    budget = FilterBudget(LIMITS)
    assert budget.claim("a1", "alice", accounts(*keys(4))) is None
    assert budget.claim("a2", "alice", accounts(*keys(1))) is not None  # alice has her share
    assert budget.claim("b1", "bob", accounts(*keys(4))) is None  # so bob has room
    refused = budget.claim("c1", "carol", accounts(*keys(1)))
    assert refused is not None
    assert "this server's streams would use 9 distinct `accounts` filters (at most 8" in refused
    budget.release("a1")
    assert budget.used() == (4, 0) and budget.used("alice") == (0, 0)
    assert budget.claim("c1", "carol", accounts(*keys(1))) is None


def test_a_replacement_is_claimed_instead_of_the_old_filters() -> None:
    budget = FilterBudget(LIMITS)
    mine = keys(4)
    assert budget.claim("s", "alice", accounts(*mine[:3])) is None
    assert budget.claim("s", "alice", accounts(*mine)) is None  # 4: within the share
    refused = budget.claim("s", "alice", accounts(*mine, *keys(1)))  # bigger: checked like a new stream
    assert refused is not None and "5 distinct `accounts`" in refused
    assert budget.used("alice") == (4, 0)  # it keeps what it had
    assert budget.claim("s", "alice", accounts(*keys(4))) is None  # four others instead of its four
    assert budget.used() == (4, 0)
    budget.release("s")
    budget.release("s")  # twice is harmless
    assert budget.used() == (0, 0)


def test_transaction_and_status_filters_count_together_and_slots_and_block_meta_never() -> None:
    budget = FilterBudget(StreamLimits(max_filters=8, account_filters=2))
    tx = pb.SubscribeRequestFilterTransactions
    a, b, c = (b58encode(key) for key in keys(3))
    request = pb.SubscribeRequest(
        transactions={"t1": tx(account_include=[a]), "t2": tx(account_include=[b])},
        transactions_status={"st": tx(account_include=[a])},  # the same filter as t1 upstream
        slots={f"s{n}": pb.SubscribeRequestFilterSlots() for n in range(10)},
        blocks_meta={"m": pb.SubscribeRequestFilterBlocksMeta()},
    )
    assert budget.claim("s", "alice", compile_request(request)) is None
    assert budget.used() == (0, 2)
    request.transactions_status["st"].CopyFrom(tx(account_include=[c]))
    refused = budget.claim("s", "alice", compile_request(request))
    assert refused is not None and "3 distinct `transactions` and `transactions_status` filters" in refused


def test_what_the_budget_counts_is_what_the_union_asks_the_node_for() -> None:
    budget = FilterBudget(StreamLimits(max_filters=100, account_filters=100))
    shared = keys(3)
    tx = pb.SubscribeRequestFilterTransactions(account_include=[b58encode(shared[0])])
    streams = {
        "s1": accounts(*shared, transactions={"t": tx}),
        "s2": accounts(*shared[:2], *keys(2), transactions_status={"st": tx}),
        "s3": accounts(*keys(1), commitment=pb.FINALIZED),
    }
    for name, filters in streams.items():
        assert budget.claim(name, "alice", filters) is None
    union = union_request(streams.values())
    assert budget.used() == (len(union.accounts), len(union.transactions)) == (6, 1)


def test_an_accounts_share_is_a_part_of_the_nodes_limit() -> None:
    assert account_share(64, 0.25) == 16 and account_share(64, 1.0) == 64 and account_share(3, 0.1) == 1


def test_streams_of_one_account_whose_filters_count_nothing_end_in_any_order() -> None:
    budget = FilterBudget(LIMITS)
    slots = compile_request(pb.SubscribeRequest(slots={"s": pb.SubscribeRequestFilterSlots()}))
    assert budget.claim("s1", "alice", slots) is None and budget.claim("s2", "alice", slots) is None
    budget.release("s1")
    budget.release("s2")  # was a KeyError: the first release forgot the account its second stream still had
    assert budget.used("alice") == (0, 0) and budget.used() == (0, 0)

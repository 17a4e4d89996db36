"""The fan-out's indexes change by what a request changes (geyser_proto.fanout), pure: a stream that churns its
filters re-indexes its own few keys, never the 10,000 another stream holds, and the indexes it leaves are the
ones a fan-out built from scratch with the same streams has; the other stream's updates never stop."""

from __future__ import annotations

import os
import random

from geyser_proto import geyser_pb2 as pb
from geyser_proto.fanout import Fanout
from geyser_proto.filters import Filters, b58encode, compile_request
from tests.grpc.test_filters import Sink, account_update, request, tx_update


def accounts(*keys: bytes, owner: bytes | None = None) -> Filters:
    named = {f"a{i}": pb.SubscribeRequestFilterAccounts(account=[b58encode(k)]) for i, k in enumerate(keys)}
    if owner is not None:
        named["owned"] = pb.SubscribeRequestFilterAccounts(owner=[b58encode(owner)])
    txs = {"t": pb.SubscribeRequestFilterTransactions(account_include=[b58encode(k) for k in keys[:2]])}
    return compile_request(request(accounts=named, transactions=txs, slots={"s": pb.SubscribeRequestFilterSlots()}))


def indexes(fanout: Fanout) -> tuple[object, ...]:
    """What matching reads, order aside (the entries by filter, and the filters by key)."""
    return (
        {f: set(entries) for f, entries in fanout._accounts.items()},
        {k: set(fs) for k, fs in fanout._account_keys.items()},
        {k: set(fs) for k, fs in fanout._account_owners.items()},
        set(fanout._account_any),
        {f: set(entries) for f, entries in fanout._txs.items()},
        {k: set(fs) for k, fs in fanout._tx_keys.items()},
        set(fanout._tx_any),
        {f: set(entries) for f, entries in fanout._slots.items()},
        set(fanout._block_meta),
    )


def test_churn_reindexes_only_the_churning_streams_keys_and_leaves_the_indexes_a_rebuild_would() -> None:
    fanout = Fanout()
    big_keys = [os.urandom(32) for _ in range(10_000)]
    big = Sink()
    named = {"big": pb.SubscribeRequestFilterAccounts(account=[b58encode(k) for k in big_keys])}
    fanout.attach(big, compile_request(request(accounts=named)))
    assert fanout.reindexed == 10_000
    pool = [os.urandom(32) for _ in range(8)]
    rng = random.Random(7)
    churners = [Sink() for _ in range(3)]
    members = [fanout.attach(sink, accounts(pool[0])) for sink in churners]
    before = fanout.reindexed
    for i in range(300):
        member = members[i % len(members)]
        fanout.replace(member, accounts(*rng.sample(pool, 3), owner=rng.choice(pool)))
        fanout.publish(account_update(i, big_keys[i], os.urandom(32)))  # the big stream's updates keep coming
    # each change touches at most its own few filters' keys (3 accounts, 1 owner, 2 tx keys in, as many out)
    assert fanout.reindexed - before <= 300 * 12
    assert [u.account.slot for u in big.got] == list(range(300))
    fanout.detach(members[0])

    fresh = Fanout()  # the same streams (the same members: entries name them) indexed from nothing
    for member in fanout.members:
        fresh.members[member] = None
        fresh._index(member, Filters(), member.filters)
    assert indexes(fresh) == indexes(fanout)

    key = next(iter(members[1].filters.accounts))[1].accounts
    fanout.publish(account_update(400, next(iter(key)), os.urandom(32)))
    fanout.publish(tx_update(401, [next(iter(members[2].filters.transactions[0][1].include))]))
    assert churners[1].kinds()[-1:] == ["account"] and churners[2].kinds()[-1:] == ["transaction"]
    assert not churners[0].got[-1:] or churners[0].got[-1].account.slot < 300  # detached: nothing more

"""Fuzzing the gRPC ``SubscribeRequest`` decoder (geyser_proto.filters.compile_request), which a tenant reaches
with every request it writes on a stream: any request compiles or is refused with ``FilterError`` (answered
``INVALID_ARGUMENT``/``UNIMPLEMENTED``), never another exception; the refusal's message is short (a key is
never echoed whole); memory stays in proportion to the request (``tracemalloc``: allocations, not time; the
suite has no timed assertions). What compiles holds 32-byte keys and 64-byte signatures only. The example:
one 300,000-character key, which the old decoder took tens of seconds to decode and echoed whole."""

from __future__ import annotations

import tracemalloc
from typing import Any

from hypothesis import event, example, given, settings
from hypothesis import strategies as st

from geyser_proto import geyser_pb2 as pb
from geyser_proto.filters import FilterError, compile_request

MAX_MESSAGE = 1024
MEMORY_PER_REQUEST_BYTE = 16
MEMORY_OVERHEAD = 256 * 1024

VALID = ["11111111111111111111111111111111", "So11111111111111111111111111111111111111112"]
SIGNATURE = "5VERv8NMvzbJMEkV8xnrLkEaWRtSz9CosKDYjCJjBRnbJLgp8uirBgmQpjKhoR4tjF3ZpRzrFmBV6UjKdiSZkQUW"
huge = st.sampled_from([45, 89, 200, 50_000, 300_000]).map(lambda n: "A" * n)
keys = st.sampled_from([*VALID, "", "0OIl", "é", "1" * 44, "z" * 44, SIGNATURE]) | huge | st.text(max_size=50)
names = st.text(min_size=0, max_size=140) | st.sampled_from(["a", "b", "x" * 129])
memcmp = st.one_of(
    st.builds(
        lambda o, b: pb.SubscribeRequestFilterAccountsFilterMemcmp(offset=o, bytes=b),
        st.integers(0, 2**40),
        st.binary(max_size=300),
    ),
    st.builds(lambda o, t: pb.SubscribeRequestFilterAccountsFilterMemcmp(offset=o, base58=t), st.integers(0, 99), keys),
    st.builds(
        lambda o, t: pb.SubscribeRequestFilterAccountsFilterMemcmp(offset=o, base64=t),
        st.integers(0, 99),
        keys | st.sampled_from(["AQID", "====", "A" * 172, "A" * 176]),
    ),
)
data_filters = st.lists(
    st.one_of(
        memcmp.map(lambda m: pb.SubscribeRequestFilterAccountsFilter(memcmp=m)),
        st.integers(0, 2**40).map(lambda n: pb.SubscribeRequestFilterAccountsFilter(datasize=n)),
        st.booleans().map(lambda b: pb.SubscribeRequestFilterAccountsFilter(token_account_state=b)),
        st.builds(
            lambda n: pb.SubscribeRequestFilterAccountsFilter(
                lamports=pb.SubscribeRequestFilterAccountsFilterLamports(gt=n)
            ),
            st.integers(0, 2**40),
        ),
        st.just(pb.SubscribeRequestFilterAccountsFilter()),
    ),
    max_size=6,
)
account_filters = st.builds(
    lambda a, o, f: pb.SubscribeRequestFilterAccounts(account=a, owner=o, filters=f),
    st.lists(keys, max_size=6),
    st.lists(keys, max_size=3),
    data_filters,
)
transaction_filters = st.builds(
    lambda s, i, e, r, v: pb.SubscribeRequestFilterTransactions(
        account_include=i, account_exclude=e, account_required=r, vote=v, **({} if s is None else {"signature": s})
    ),
    st.none() | keys | st.just(SIGNATURE),
    st.lists(keys, max_size=4),
    st.lists(keys, max_size=2),
    st.lists(keys, max_size=2),
    st.booleans(),
)


def request_of(fields: dict[str, Any]) -> pb.SubscribeRequest:
    request = pb.SubscribeRequest()
    for name, f in fields.get("accounts", {}).items():
        request.accounts[name].CopyFrom(f)
    for name, f in fields.get("transactions", {}).items():
        request.transactions[name].CopyFrom(f)
    for name in fields.get("slots", []):
        request.slots[name].filter_by_commitment = True
    for offset, length in fields.get("slices", []):
        request.accounts_data_slice.add(offset=offset, length=length)
    if "commitment" in fields:
        request.commitment = fields["commitment"]
    if "from_slot" in fields:
        request.from_slot = fields["from_slot"]
    return request


requests = st.fixed_dictionaries(
    {},
    optional={
        "accounts": st.dictionaries(names, account_filters, max_size=4),
        "transactions": st.dictionaries(names, transaction_filters, max_size=3),
        "slots": st.lists(names, max_size=3),
        "slices": st.lists(st.tuples(st.integers(0, 2**20), st.integers(0, 2**20)), max_size=4),
        "commitment": st.integers(0, 5),
        "from_slot": st.integers(0, 2**40),  # UNIMPLEMENTED without a replay log
    },
).map(request_of)
many_keys = st.integers(9_000, 11_000).map(
    lambda n: pb.SubscribeRequest(accounts={"a": pb.SubscribeRequestFilterAccounts(account=[VALID[0]] * n)})
)


@settings(max_examples=300, deadline=None)
@given(request=requests | many_keys)
@example(request=pb.SubscribeRequest(accounts={"a": pb.SubscribeRequestFilterAccounts(account=["A" * 300_000])}))
def test_any_request_compiles_or_is_refused_briefly_in_bounded_memory(request: pb.SubscribeRequest) -> None:
    size = request.ByteSize()
    refused: FilterError | None = None
    tracemalloc.start()
    try:
        filters = compile_request(request)
    except FilterError as exc:
        refused = exc
    finally:
        _, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
    assert peak <= MEMORY_OVERHEAD + MEMORY_PER_REQUEST_BYTE * size, (peak, size)
    if refused is not None:
        event(f"refused {type(refused).__name__}")
        assert len(str(refused)) <= MAX_MESSAGE, str(refused)[:200]
        return
    event("compiled")
    for _, af in filters.accounts:
        assert all(len(k) == 32 for k in (*af.accounts, *af.owners))
    for _, tf in filters.transactions:
        assert all(len(k) == 32 for k in (*tf.include, *tf.exclude, *tf.required))
        assert tf.signature is None or len(tf.signature) == 64

"""Fuzzing the gRPC stream's request decoder (:func:`geyser_proto.filters.compile_request`).

Any ``SubscribeRequest`` the transport lets through (its byte limit is applied before this decoder runs)
compiles to filters or is refused with :class:`FilterError` (answered ``INVALID_ARGUMENT``), never
another exception, and holds memory in proportion to the request. Long keys are where the old decoder
spent seconds: here they are drawn up to the transport's limit. Memory is measured with
``tracemalloc`` (allocations, not time: the suite has no timed assertions).
"""

from __future__ import annotations

import tracemalloc

from google.protobuf.message import DecodeError
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from geyser_proto import geyser_pb2
from geyser_proto.filters import DEFAULT_LIMITS, FilterError, FilterLimits, Filters, compile_request

KEY = "11111111111111111111111111111111"
ALPHABET = "123456789ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz"
MEMORY_PER_REQUEST_BYTE = 16
MEMORY_OVERHEAD = 512 * 1024

base58_texts = st.one_of(
    st.just(KEY),
    st.text(ALPHABET, max_size=100),
    st.text(max_size=60),
    st.integers(min_value=45, max_value=DEFAULT_LIMITS.max_request_bytes - 64).map(lambda n: "2" * n),
)
key_lists = st.lists(base58_texts, max_size=6)
memcmps = st.builds(
    geyser_pb2.SubscribeRequestFilterAccountsFilterMemcmp,
    offset=st.integers(min_value=0, max_value=2**64 - 1),
    base58=st.text(ALPHABET, max_size=300),
)
account_filters = st.builds(
    geyser_pb2.SubscribeRequestFilterAccounts,
    account=key_lists,
    owner=key_lists,
    filters=st.lists(st.builds(geyser_pb2.SubscribeRequestFilterAccountsFilter, memcmp=memcmps), max_size=4),
)
transaction_filters = st.builds(
    geyser_pb2.SubscribeRequestFilterTransactions,
    account_include=key_lists,
    account_exclude=key_lists,
    account_required=key_lists,
    signature=st.none() | base58_texts,
)
names = st.text(max_size=200)
requests = st.builds(
    geyser_pb2.SubscribeRequest,
    accounts=st.dictionaries(names, account_filters, max_size=4),
    transactions=st.dictionaries(names, transaction_filters, max_size=4),
    slots=st.dictionaries(names, st.builds(geyser_pb2.SubscribeRequestFilterSlots), max_size=3),
    commitment=st.none() | st.integers(min_value=-3, max_value=9),
)


def _from_wire(raw: bytes) -> geyser_pb2.SubscribeRequest | None:
    try:
        return geyser_pb2.SubscribeRequest.FromString(raw)
    except DecodeError:
        return None  # grpcio answers such a message INTERNAL before the service sees it


def _compile(request: geyser_pb2.SubscribeRequest, limits: FilterLimits) -> Filters | FilterError:
    try:
        return compile_request(request, limits)
    except FilterError as exc:
        return exc


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(
    request=st.one_of(requests, st.binary(max_size=4096).map(_from_wire)),
    limits=st.sampled_from([DEFAULT_LIMITS, FilterLimits(from_slot=True)]),
)
def test_every_request_compiles_or_is_refused_in_bounded_memory(
    request: geyser_pb2.SubscribeRequest | None, limits: FilterLimits
) -> None:
    if request is None:
        return
    size = request.ByteSize()
    tracemalloc.start()
    try:
        outcome = _compile(request, limits)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    if isinstance(outcome, FilterError):
        assert 0 < len(str(outcome)) <= 1024  # a refusal quotes at most the start of a long key
    else:
        assert isinstance(outcome, Filters)
    assert peak <= MEMORY_OVERHEAD + MEMORY_PER_REQUEST_BYTE * size


def test_a_valid_request_still_compiles() -> None:
    """The fuzz above would pass on a decoder that refuses everything: this one must compile."""
    request = geyser_pb2.SubscribeRequest(accounts={"a": geyser_pb2.SubscribeRequestFilterAccounts(account=[KEY])})
    assert isinstance(compile_request(request), Filters)

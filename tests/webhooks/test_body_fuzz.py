"""Fuzzing ``POST /webhooks``' body decoder (:func:`gateway.webhooks.validation.parse_creation`).

Any body up to the route's limit (``REST_MAX_BODY_BYTES``, applied before this decoder runs) either
becomes a subscription or is refused with a 400 ``INVALID_REQUEST`` naming the field, and its decoding
holds memory in proportion to the body: no other exception (a 500), no blow-up. Memory is measured
with ``tracemalloc`` (allocations, not time: the suite has no timed assertions).
"""

from __future__ import annotations

import tracemalloc
from typing import Any

import orjson
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gateway.core.errors import ProxyError
from gateway.pipeline.http import REST_MAX_BODY_BYTES
from gateway.webhooks.events import LIFECYCLE_EVENTS
from gateway.webhooks.rules import FILTER_TYPES
from gateway.webhooks.store.subscriptions import NewWebhook
from gateway.webhooks.validation import parse_creation

CALLER = "11111111111111111111111111111111"
FIELDS = ("url", "filter_type", "filter_value", "lifecycle_events", "signal_events")
# A body's decoding may hold a few copies of it (bytes, the parsed document, the model) and a fixed
# overhead for pydantic's error objects; anything past this is a decoder that grows faster than its input.
MEMORY_PER_BODY_BYTE = 16
MEMORY_OVERHEAD = 256 * 1024

json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**63), max_value=2**63 - 1)
    | st.floats(allow_nan=False)
    | st.text(max_size=200),
    lambda children: st.lists(children, max_size=8) | st.dictionaries(st.text(max_size=20), children, max_size=8),
    max_leaves=40,
)
field_values = st.one_of(
    json_values,
    st.sampled_from(FILTER_TYPES),
    st.lists(st.sampled_from(LIFECYCLE_EVENTS), max_size=5),
    st.sampled_from(["https://hooks.example.com/x", "http://127.1/", "https://[::1]/", "https://10.0.0.1:99999/"]),
    st.text(min_size=1000, max_size=5000),
)
documents = st.dictionaries(st.sampled_from(FIELDS) | st.text(max_size=12), field_values, max_size=7)
bodies = st.one_of(
    documents.map(orjson.dumps),
    json_values.map(orjson.dumps),
    st.binary(max_size=2048),
    st.integers(min_value=1, max_value=REST_MAX_BODY_BYTES // 4).map(lambda n: b"[" * n),  # deep nesting
    st.integers(min_value=1, max_value=REST_MAX_BODY_BYTES - 64).map(
        lambda n: orjson.dumps({"url": "https://" + "a" * n, "filter_type": "account"})
    ),
)


def _decode(body: bytes, allow_private: bool) -> Any:
    try:
        return parse_creation(body, CALLER, allow_private)
    except ProxyError as exc:
        return exc


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(body=bodies, allow_private=st.booleans())
def test_every_body_is_a_subscription_or_a_400_in_bounded_memory(body: bytes, allow_private: bool) -> None:
    body = body[:REST_MAX_BODY_BYTES]
    tracemalloc.start()
    try:
        outcome = _decode(body, allow_private)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    if isinstance(outcome, ProxyError):
        assert (outcome.status, outcome.constant) == (400, "INVALID_REQUEST")
        assert 0 < len(outcome.message) <= 1024  # a refusal quotes at most a short piece of the value
    else:
        assert isinstance(outcome, NewWebhook)
        assert outcome.filter_type in FILTER_TYPES
    assert peak <= MEMORY_OVERHEAD + MEMORY_PER_BODY_BYTE * len(body)


def test_a_valid_body_still_becomes_a_subscription() -> None:
    """The fuzz above would pass on a decoder that refuses everything: this one must be accepted."""
    body = orjson.dumps(
        {"url": "https://hooks.example.com/x", "filter_type": "lifecycle", "lifecycle_events": ["api_key.rotated"]}
    )
    created = parse_creation(body, CALLER, allow_private=False)
    assert created == NewWebhook(
        url="https://hooks.example.com/x", filter_type="lifecycle", lifecycle_events=("api_key.rotated",)
    )

"""subscribeSignal's filter and /signals/recent's query (gateway.signals.rules): parsing, its messages,
and AND matching."""

from __future__ import annotations

from typing import Any

import pytest

from gateway.signals.rules import KINDS, RecentQuery, SignalEvent, SignalFilter, parse_event_id
from pumpfun.ids import PUMP_AMM_PROGRAM_ID, PUMP_PROGRAM_ID, USDC_MINT

PUMP, AMM, MINT = str(PUMP_PROGRAM_ID), str(PUMP_AMM_PROGRAM_ID), str(USDC_MINT)
OTHER_MINT = "So11111111111111111111111111111111111111112"


def event(kind: str = "newPair", program: str = PUMP, mint: str | None = MINT) -> SignalEvent:
    return SignalEvent(kind, program, "5" * 88, 7, mint, (MINT,))  # type: ignore[arg-type]


@pytest.mark.parametrize("params", [None, [], [None], [{}]])
def test_no_filter_matches_every_event(params: Any) -> None:
    wanted = SignalFilter.parse(params)
    assert wanted == SignalFilter()
    assert all(
        wanted.matches(event(kind, program, mint)) for kind in KINDS for program in (PUMP, AMM) for mint in (MINT, None)
    )


def test_fields_combine_with_and() -> None:
    wanted = SignalFilter.parse([{"kinds": ["newPair", "graduation"], "mint": MINT, "programs": [PUMP]}])
    assert wanted.matches(event("newPair"))
    assert wanted.matches(event("graduation").to_json())  # the dict a feed listener gets
    assert not wanted.matches(event("largeSwap"))
    assert not wanted.matches(event(mint=OTHER_MINT))
    assert not wanted.matches(event(mint=None))
    assert not wanted.matches(event(program=AMM))
    only_programs = SignalFilter.parse([{"programs": [AMM, PUMP]}])
    assert only_programs.matches(event(program=AMM)) and only_programs.matches(event(kind="walletActivity"))


@pytest.mark.parametrize(
    ("params", "message"),
    [
        ({"kinds": ["newPair"]}, "params must be an array of at most one filter object"),
        ([{}, {}], "params must be an array of at most one filter object"),
        (["newPair"], "the filter must be an object"),
        (
            [{"kinds": ["newPair", "rugPull"]}],
            "unknown signal kind 'rugPull'; known kinds: newPair, graduation, largeSwap, walletActivity",
        ),
        ([{"kinds": []}], "kinds must be a non-empty array"),
        ([{"kinds": "newPair"}], "kinds must be a non-empty array"),
        ([{"mint": "not-a-key"}], "mint must be a base58 public key"),
        ([{"mint": 7}], "mint must be a base58 public key"),
        ([{"programs": []}], "programs must be an array of 1 to 16"),
        ([{"programs": [PUMP] * 17}], "programs must be an array of 1 to 16"),
        ([{"programs": [PUMP, "0OIl"]}], "programs: '0OIl' is not a base58 public key"),
        ([{"kind": ["newPair"]}], "unknown filter field 'kind'; known fields: kinds, mint, programs"),
    ],
)
def test_a_bad_filter_is_refused_with_a_message_that_says_why(params: Any, message: str) -> None:
    with pytest.raises(ValueError) as caught:
        SignalFilter.parse(params)
    assert str(caught.value).startswith(message)


def test_an_event_serialises_with_every_field() -> None:
    doc = event().to_json()
    assert list(doc) == [
        "kind", "program", "signature", "slot", "mint", "accounts", "quote_asset", "curve_type", "complete",
        "block_time", "sol_amount", "side",
    ]  # fmt: skip
    assert doc["accounts"] == [MINT] and doc["complete"] is None


def test_recent_query_defaults_and_bounds() -> None:
    assert RecentQuery.parse({}) == RecentQuery(100, None, None, None)
    query = RecentQuery.parse({"limit": "1000", "kind": "largeSwap", "since_slot": "0", "before": "12-3"})
    assert query == RecentQuery(1000, "largeSwap", 0, "12-3")
    assert parse_event_id("12-3") == (12, 3) and parse_event_id("18446744073709551616-0") is None


@pytest.mark.parametrize(
    ("query", "message"),
    [
        ({"limit": "0"}, "limit must be an integer from 1 to 1000"),
        ({"limit": "1001"}, "limit must be an integer from 1 to 1000"),
        ({"limit": "-5"}, "limit must be an integer from 1 to 1000"),
        ({"limit": "ten"}, "limit must be an integer from 1 to 1000"),
        ({"since_slot": "1.5"}, "since_slot must be an integer from 0"),
        ({"kind": "rugPull"}, "unknown signal kind 'rugPull'"),
        ({"before": "12"}, "before must be an event id"),
        ({"kinds": "newPair"}, "unknown query parameter 'kinds'"),
    ],
)
def test_a_bad_recent_query_is_refused_with_a_message(query: dict[str, str], message: str) -> None:
    with pytest.raises(ValueError) as caught:
        RecentQuery.parse(query)
    assert str(caught.value).startswith(message)

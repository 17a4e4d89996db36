"""The RECALL channel's messages: typed both ways, the wire text unchanged, garbage ignored."""

from __future__ import annotations

import logging

import pytest
from hypothesis import given
from hypothesis import strategies as st

from gateway.credits.recall_messages import OPERATOR, SPEND_CAP, Back, Want, encode, parse

words = st.text(st.characters(min_codepoint=33, max_codepoint=126), min_size=1, max_size=50)


def test_the_wire_text_is_the_one_older_processes_send_and_read() -> None:
    assert encode(Want("3f2a", "Pk1")) == "want 3f2a Pk1"
    assert encode(Want(OPERATOR, "Pk1")) == "want operator Pk1"
    assert encode(Want(SPEND_CAP, "Pk1")) == "want spend-cap Pk1"
    assert encode(Back("3f2a", "Pk1", 40)) == "back 3f2a Pk1 40"
    assert parse("want spend-cap Pk1") == Want("spend-cap", "Pk1")
    assert parse("back 3f2a Pk1 40") == Back("3f2a", "Pk1", 40)


@given(sender=words, pubkey=words, credits=st.integers(min_value=0, max_value=10**15))
def test_round_trips(sender: str, pubkey: str, credits: int) -> None:
    for message in (Want(sender, pubkey), Back(sender, pubkey, credits)):
        assert parse(encode(message)) == message


@pytest.mark.parametrize(
    "text",
    [
        "",
        "want",
        "want 3f2a",
        "back 3f2a Pk1",
        "back 3f2a Pk1 -4",
        "back 3f2a Pk1 many",
        "back 3f2a Pk1 \u00b2",
        "wants 3f2a Pk1",
        "hello",
    ],
)
def test_garbage_is_ignored_with_a_log_line(text: str, caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.INFO, logger="gateway.credits.recall_messages"):
        assert parse(text) is None
    assert "ignored a recall message" in caplog.text


@given(text=st.text(max_size=80))
def test_no_text_raises(text: str) -> None:
    message = parse(text)
    assert message is None or parse(encode(message)) == message

"""The header rule behind DropRayRequestId (through Ray it is covered by tests/integration/test_stack.py)."""

from __future__ import annotations

from gateway.transports.ray_request_id import drop_last


def test_the_last_request_id_goes_and_the_first_stays() -> None:
    headers = [(b"x-request-id", b"ours"), (b"content-type", b"application/json"), (b"x-request-id", b"rays")]
    assert drop_last(headers, b"x-request-id") == [(b"x-request-id", b"ours"), (b"content-type", b"application/json")]


def test_a_lone_request_id_goes_and_nothing_else_changes() -> None:
    assert drop_last([(b"X-Request-ID", b"rays"), (b"a", b"1")], b"x-request-id") == [(b"a", b"1")]
    assert drop_last([(b"a", b"1")], b"x-request-id") == [(b"a", b"1")]

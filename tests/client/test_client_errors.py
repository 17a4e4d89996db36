"""gateway_client: each documented error becomes its own exception; amounts of USDC are exact."""

from __future__ import annotations

from typing import Any

import pytest

from gateway.cli.fund import FundError, usdc_base_units
from gateway_client import errors


@pytest.mark.parametrize(
    ("status", "body", "headers", "kind"),
    [
        (200, {"jsonrpc": "2.0", "id": 1, "result": 5}, {}, None),
        (200, [{"jsonrpc": "2.0", "id": 1, "result": 5}], {}, None),
        (201, {"id": "wh_1", "secret": "s"}, {}, None),  # POST /webhooks creates
        (200, {"jsonrpc": "2.0", "id": 1, "error": {"code": -32601, "message": "no"}}, {}, errors.RpcError),
        (400, {"error": {"code": "INVALID_REQUEST", "message": "bad"}}, {}, errors.InvalidRequest),
        (401, {"error": {"code": "AUTH_FAILED", "message": "bad key"}}, {}, errors.AuthFailed),
        (402, {"jsonrpc": "2.0", "error": {"code": -32002, "message": "pay", "data": {}}}, {}, errors.PaymentRequired),
        (402, {"jsonrpc": "2.0", "error": {"code": -32010, "message": "low"}}, {}, errors.InsufficientCredits),
        (403, {"error": {"code": "NONCE_REUSED", "message": "again"}}, {}, errors.NonceReused),
        (403, {"error": {"code": "ACCOUNT_SUSPENDED", "message": "no"}}, {}, errors.Forbidden),
        (
            429,
            {"jsonrpc": "2.0", "error": {"code": -32005, "message": "slow"}},
            {"retry-after": "3"},
            errors.RateLimited,
        ),
        (503, {"jsonrpc": "2.0", "error": {"code": -32003, "message": "wait"}}, {}, errors.BackendUnavailable),
        (500, "<html>", {}, errors.GatewayError),
    ],
)
def test_each_answer_maps_to_its_error(status: int, body: Any, headers: dict[str, str], kind: type | None) -> None:
    error = errors.error_from_answer(status, headers, body)
    if kind is None:
        assert error is None
        return
    assert type(error) is kind and error.status == status
    if isinstance(error, errors.RateLimited):
        assert error.retry_after == 3.0


def test_usdc_amounts_are_exact_base_units() -> None:
    assert usdc_base_units("10") == 10_000_000
    assert usdc_base_units("0.01") == 10_000
    assert usdc_base_units("0.123456") == 123_456
    for bad in ("0.001", "1.0000001", "-1", "nan", "abc"):
        with pytest.raises(FundError):
            usdc_base_units(bad)

"""The x402 payment headers of a paid JSON-RPC call (docs/api.md, x402 settlement). Pure: no I/O.

In: ``PAYMENT-SIGNATURE`` (x402 v2) or ``X-PAYMENT`` (v1), base64 of the SDK's ``PaymentPayload``
JSON; its length is bounded before it is decoded. It must name the scheme ``exact`` and this
deployment's network, and (v2, whose ``accepted`` repeats the terms) the terms' asset and ``payTo``;
``payload.transaction`` is then checked by :mod:`gateway.x402.rules`. Out: ``PAYMENT-RESPONSE``
(``X-PAYMENT-RESPONSE`` for v1), base64 of the SDK's ``SettleResponse`` JSON.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import orjson

from gateway.x402.rules import Reason, Refusal

PAYMENT_SIGNATURE = "payment-signature"  # request headers arrive with lower-case names
X_PAYMENT = "x-payment"
PAYMENT_RESPONSE = "PAYMENT-RESPONSE"
X_PAYMENT_RESPONSE = "X-PAYMENT-RESPONSE"
#: The longest header read: base64 of a payload carrying the largest (v1, 4,096-byte) transaction in
#: base64, the terms it accepted and the resource; a longer one is refused undecoded.
MAX_HEADER_CHARS = 16 * 1024
#: x402 v1 names the network; v2 uses CAIP-2 ids (``x402/mechanisms/svm/constants.py``).
V1_NETWORKS = {
    "solana:5eykt4UsFv8P8NJdTREpY1vzqKqZKvdp": "solana",
    "solana:EtWTRABZaYq6iMfeYKouRu166VU2xqa1": "solana-devnet",
    "solana:4uhcVJyU9pJkvQyS88uRDiswHXSCkY3z": "solana-testnet",
}


@dataclass(frozen=True, slots=True)
class Terms:
    """What the 402 asked for: the header's payload must match it."""

    network: str  # CAIP-2
    asset: str  # the USDC mint
    pay_to: str  # the deposit wallet


@dataclass(frozen=True, slots=True)
class Offer:
    """A decoded payment header: its x402 version and the base64 transaction it carries."""

    version: int
    transaction: str
    network: str  # as the payload named it (v1: a name, v2: CAIP-2)


def payment_header(headers: Mapping[str, str]) -> tuple[int, str] | None:
    """(the version its name implies, the value) of the call's payment header, or None."""
    value = headers.get(PAYMENT_SIGNATURE)
    if value is not None:
        return 2, value
    value = headers.get(X_PAYMENT)
    return (1, value) if value is not None else None


def read_offer(value: str, terms: Terms) -> Offer | Refusal:
    """The payment the header carries, or why it is not one for these terms."""
    value = value.strip()
    if len(value) > MAX_HEADER_CHARS:
        return _bad(f"the payment header is longer than {MAX_HEADER_CHARS} characters")
    try:
        document = orjson.loads(base64.b64decode(value, validate=True))
    except (binascii.Error, ValueError):  # orjson.JSONDecodeError is a ValueError
        return _bad("the payment header must be base64 of the x402 PaymentPayload JSON")
    if not isinstance(document, dict):
        return _bad("the payment header's JSON must be an x402 PaymentPayload object")
    version = document.get("x402Version")
    if version == 2:
        accepted = document.get("accepted")
        if not isinstance(accepted, dict):
            return _bad("an x402 v2 PaymentPayload must carry `accepted`, the terms it pays")
        scheme, network = accepted.get("scheme"), accepted.get("network")
    elif version == 1:
        accepted, scheme, network = None, document.get("scheme"), document.get("network")
    else:
        return _bad(f"x402Version must be 1 or 2, not {version!r}")
    refusal = _terms_refusal(scheme, network, version, accepted, terms)
    if refusal is not None:
        return refusal
    payload = document.get("payload")
    transaction = payload.get("transaction") if isinstance(payload, dict) else None
    if not isinstance(transaction, str) or not transaction:
        return _bad("the PaymentPayload's `payload.transaction` must be the base64 payment transaction")
    return Offer(version, transaction, str(network))


def _terms_refusal(
    scheme: Any, network: Any, version: int, accepted: dict[str, Any] | None, terms: Terms
) -> Refusal | None:
    if scheme != "exact":
        return Refusal(Reason.UNSUPPORTED_SCHEME, f"scheme {scheme!r} is not accepted here: only 'exact'")
    expected = terms.network if version == 2 else V1_NETWORKS.get(terms.network, terms.network)
    if network != expected:
        return Refusal(Reason.NETWORK_MISMATCH, f"network {network!r} is not this gateway's: it accepts {expected}")
    if accepted is None:
        return None
    if accepted.get("asset") != terms.asset:
        return Refusal(
            Reason.WRONG_MINT, f"the accepted asset {accepted.get('asset')!r} is not the USDC mint {terms.asset}"
        )
    if accepted.get("payTo") != terms.pay_to:
        return Refusal(
            Reason.WRONG_DESTINATION,
            f"the accepted payTo {accepted.get('payTo')!r} is not the deposit wallet {terms.pay_to}",
        )
    return None


def _bad(message: str) -> Refusal:
    return Refusal(Reason.INVALID_PAYMENT_HEADER, message)


def response_header(document: Mapping[str, Any]) -> str:
    """A ``SettleResponse`` document as the header carries it: base64 of its JSON."""
    return base64.b64encode(orjson.dumps(document)).decode("ascii")


def settle_response(transaction: str, network: str, payer: str, amount_base_units: int) -> dict[str, Any]:
    """The SDK's ``SettleResponse`` of a payment that landed (camelCase, as the SDK serializes it)."""
    return {
        "success": True,
        "payer": payer,
        "transaction": transaction,
        "network": network,
        "amount": str(amount_base_units),
    }

"""``/x402/settle`` and ``/x402/blockhash`` in the OpenAPI document (built with :mod:`gateway.core.api_doc`;
docs/api.md, x402): unauthenticated; every refusal is the HTTP error body with ``data.reason``."""

from __future__ import annotations

from typing import Any

from gateway.core.api_doc import ApiDoc, errors, json_answer, operation, ref
from gateway.x402.blockhash import BLOCKHASH_PATH
from gateway.x402.models import SettleAnswer, SettleRequest
from gateway.x402.routes import SETTLE_PATH


def _settle_operation() -> dict[str, Any]:
    return operation(
        "x402: settle a USDC payment transaction to the deposit wallet, self-paid or sponsored (the service "
        "co-signs as fee payer); credit it afterwards with /account/confirm-deposit (docs/api.md, x402)",
        json_answer(ref("SettleAnswer"), "broadcast; confirmed, or accepted and not yet confirmed (see message)"),
        {
            "400": json_answer(
                ref("ErrorBody"),
                "INVALID_REQUEST; data.reason: unparseable_body, invalid_base64, invalid_transaction, "
                "wrong_destination, wrong_mint, amount_below_minimum, no_payment_instruction, "
                "unsignable_authority, sponsored_whitelist_violation, missing_signature, duplicate_settlement",
            ),
            **errors(405, 413, 429, 500),
            "502": json_answer(
                ref("ErrorBody"),
                "UPSTREAM_ERROR: the network rejected the transaction (data.reason preflight_rejected, with the "
                "node's reason), it landed and failed (transaction_failed), or the node could not be reached",
            ),
            "503": json_answer(
                ref("ErrorBody"),
                "SETTLEMENT_NOT_CONFIGURED (settlement off, or the fee payer has no SOL for sponsored payments), "
                "or SERVICE_TEMPORARILY_UNAVAILABLE (the database)",
            ),
        },
        body="SettleRequest",
        tag="x402",
    )


def _blockhash_operation() -> dict[str, Any]:
    """Beyond the interface; one cached node read per replica."""
    answer = {
        "type": "object",
        "required": ["blockhash", "last_valid_block_height"],
        "properties": {"blockhash": {"type": "string"}, "last_valid_block_height": {"type": "integer"}},
    }
    return operation(
        "x402: a recent blockhash to build a payment on, for a client with no RPC of its own (beyond the "
        "interface; at most 2 s old, shared by every caller; docs/api.md, x402)",
        json_answer(answer, "the node's confirmed blockhash"),
        {
            **errors(405, 429, 500),
            "502": json_answer(ref("ErrorBody"), "UPSTREAM_ERROR: the node gave no blockhash"),
            "503": json_answer(ref("ErrorBody"), "SETTLEMENT_NOT_CONFIGURED: settlement is off here"),
        },
        tag="x402",
    )


def paths() -> dict[str, Any]:
    return {SETTLE_PATH: {"post": _settle_operation()}, BLOCKHASH_PATH: {"get": _blockhash_operation()}}


API_DOC = ApiDoc(paths, (SettleRequest, SettleAnswer))

"""``POST /account/confirm-deposit`` in the OpenAPI document (built with :mod:`gateway.core.api_doc`; mounted
after the account's routes, :mod:`gateway.credits.routes`)."""

from __future__ import annotations

from typing import Any

from gateway.core.api_doc import ApiDoc, errors, json_answer, operation, ref, rest_errors
from gateway.credits.models import ConfirmDepositRequest, ConfirmedDeposit


def paths() -> dict[str, Any]:
    return {
        "/account/confirm-deposit": {
            "post": operation(
                "Credit a finalized USDC deposit now (to the transfer's authority wallet)",
                json_answer(ref("ConfirmedDeposit"), "credited, or already processed"),
                {**rest_errors(), **errors(401, 403, 502), **errors(402, rpc=(402,))},
                body="ConfirmDepositRequest",
                secured=True,
                tag="Account",
            )
        }
    }


API_DOC = ApiDoc(paths, (ConfirmDepositRequest, ConfirmedDeposit))

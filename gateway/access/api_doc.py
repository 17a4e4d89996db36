"""``/account/access`` and ``/account/spend-cap`` in the OpenAPI document (built with
:mod:`gateway.core.api_doc`): read with any credential, replaced with the wallet's own signature only."""

from __future__ import annotations

from typing import Any

from gateway.access.models import AccessRulesAnswer, AccessRulesRequest, SpendCapAnswer, SpendCapRequest
from gateway.access.routes import ACCESS_PATH, SPEND_CAP_PATH
from gateway.auth.api_doc import account_read
from gateway.core.api_doc import ApiDoc, errors, json_answer, operation, ref, rest_errors


def _wallet_write(summary: str, answer: str, description: str, body: str) -> dict[str, Any]:
    return {
        **operation(
            summary,
            json_answer(ref(answer), description),
            {**rest_errors(), **errors(401, 403, 404), **errors(402, rpc=(402,))},
            body=body,
            tag="Account",
        ),
        "security": [{"walletSignature": []}],
    }


def paths() -> dict[str, Any]:
    return {
        ACCESS_PATH: {
            **account_read("The account's access rules (any credential)", "AccessRulesAnswer"),
            "post": _wallet_write(
                "Replace the account's access rules (the wallet's own signature only)",
                "AccessRulesAnswer",
                "the rules now in force",
                "AccessRulesRequest",
            ),
        },
        SPEND_CAP_PATH: {
            **account_read("The account's daily spend cap and today's spending (any credential)", "SpendCapAnswer"),
            "post": _wallet_write(
                "Set the account's daily spend cap (the wallet's own signature only)",
                "SpendCapAnswer",
                "the cap now in force",
                "SpendCapRequest",
            ),
        },
    }


API_DOC = ApiDoc(paths, (AccessRulesRequest, AccessRulesAnswer, SpendCapRequest, SpendCapAnswer))

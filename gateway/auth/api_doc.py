"""``/auth/*`` and the account's own ``/account/*`` reads in the OpenAPI document (built with
:mod:`gateway.core.api_doc`; the bodies are :mod:`gateway.auth.models`)."""

from __future__ import annotations

from typing import Any

from gateway.auth.models import (
    Account,
    ApiKeyAnswer,
    ApiKeyRequest,
    Challenge,
    ChallengeRequest,
    HistoryPage,
    LedgerPage,
    LogoutAnswer,
    SessionList,
    SessionsEnded,
    Token,
    VerifyRequest,
)
from gateway.auth.paging import MAX_LIMIT, MAX_OFFSET
from gateway.auth.usage_models import UsageTotals
from gateway.auth.usage_totals import EXPORT_MAX_ROWS, MAX_DAYS
from gateway.core.api_doc import ApiDoc, errors, json_answer, operation, ref, rest_errors

#: Ending sessions takes the wallet's own proof: its signature, or an owner session's bearer token.
OWNER_PROOF: list[dict[str, list[str]]] = [{"walletSignature": []}, {"bearer": []}]

_PAGE_PARAMS = [
    {"name": "limit", "in": "query", "schema": {"type": "integer", "minimum": 1, "maximum": MAX_LIMIT}},
    {"name": "offset", "in": "query", "schema": {"type": "integer", "minimum": 0, "maximum": MAX_OFFSET}},
    {"name": "cursor", "in": "query", "schema": {"type": "string"}, "description": "next_cursor of the last page"},
]


def account_read(summary: str, answer: str, paged: bool = False) -> dict[str, Any]:
    """A ``GET`` of the account's own data, with any credential (access rules and spend cap have theirs too)."""
    return {
        "get": operation(
            summary,
            json_answer(ref(answer), "the resource"),
            {**errors(400, 401, 403, 404, 429, 500, 503), **errors(402, rpc=(402,))},
            secured=True,
            params=_PAGE_PARAMS if paged else None,
            tag="Account",
        )
    }


def _session_paths() -> dict[str, Any]:
    return {
        "/auth/challenge": {
            "post": operation(
                "A challenge to sign (valid 300 s)",
                json_answer(ref("Challenge"), "the challenge"),
                rest_errors(),
                body="ChallengeRequest",
                tag="Session",
            )
        },
        "/auth/verify": {
            "post": operation(
                "A session token for a signed challenge or Sign-In With Solana message (1 h, sliding)",
                json_answer(ref("Token"), "the token"),
                {**rest_errors(), **errors(401)},
                body="VerifyRequest",
                tag="Session",
            )
        },
        "/auth/logout": {
            "post": {
                **operation(
                    "Revoke the session token",
                    json_answer(ref("LogoutAnswer"), "revoked"),
                    {**rest_errors(), **errors(401), **errors(402, rpc=(402,))},
                    tag="Session",
                ),
                "security": [{"bearer": []}],
            }
        },
        **_sessions_paths(),
    }


def _sessions_paths() -> dict[str, Any]:
    """The account's live sessions: listed with any credential, ended with the wallet's own proof."""
    ending = {**errors(400, 401, 403, 405, 413, 429, 500, 503), **errors(402, rpc=(402,))}
    id_param = [{"name": "id", "in": "path", "required": True, "schema": {"type": "string"}}]
    one = {**ending, "404": json_answer(ref("ErrorBody"), "no live session of this account has that id: NOT_FOUND")}
    ended = json_answer(ref("SessionsEnded"), "ended")
    listed = account_read("The account's live sessions, newest first (never their tokens)", "SessionList")
    # what to call on a session just listed (schemathesis follows links too)
    listed["get"]["responses"]["200"]["links"] = {
        "endSession": {"operationId": "endSession", "parameters": {"id": "$response.body#/sessions/0/id"}}
    }
    return {
        "/account/sessions": {
            **listed,
            "delete": {
                **operation(
                    "End every live session but the caller's own owner session (wallet signature or owner session)",
                    ended,
                    ending,
                    tag="Session",
                ),
                "security": OWNER_PROOF,
            },
        },
        "/account/sessions/{id}": {
            "delete": {
                **operation(
                    "End one live session (wallet signature or owner session)",
                    ended,
                    one,
                    params=id_param,
                    tag="Session",
                ),
                "security": OWNER_PROOF,
                "operationId": "endSession",
            }
        },
    }


def _usage_paths() -> dict[str, Any]:
    """The account page's reads beyond docs/api.md's interface (docs/api.md, Usage totals, CSV exports)."""
    refusals = {**errors(400, 401, 403, 404, 429, 500, 503), **errors(402, rpc=(402,))}
    days = {"name": "days", "in": "query", "schema": {"type": "integer", "minimum": 1, "maximum": MAX_DAYS}}
    export = [
        {"name": "limit", "in": "query", "schema": {"type": "integer", "minimum": 1, "maximum": EXPORT_MAX_ROWS}},
        {"name": "cursor", "in": "query", "schema": {"type": "string"}, "description": "start below this row"},
    ]
    csv = {"description": "CSV, newest first, streamed", "content": {"text/csv": {"schema": {"type": "string"}}}}
    return {
        "/account/usage/daily": {
            "get": operation(
                "Credits, calls and refunds per UTC day, method class and method (beyond the interface)",
                json_answer(ref("UsageTotals"), "the totals"),
                refusals,
                secured=True,
                params=[days],
                tag="Account",
            )
        },
        "/account/usage.csv": {
            "get": operation(
                "The usage history as a CSV file (beyond the interface)",
                csv,
                refusals,
                secured=True,
                params=export,
                tag="Account",
            )
        },
        "/account/ledger.csv": {
            "get": operation(
                "The ledger as a CSV file (beyond the interface)",
                csv,
                refusals,
                secured=True,
                params=export,
                tag="Account",
            )
        },
    }


def paths() -> dict[str, Any]:
    return {
        **_session_paths(),
        "/account/api-key": {
            "post": {
                **operation(
                    "Create the account's API key (shown once; rotates any previous key)",
                    json_answer(ref("ApiKeyAnswer"), "the new key"),
                    {**rest_errors(), **errors(401, 403), **errors(402, rpc=(402,))},
                    body="ApiKeyRequest",
                    tag="Account",
                ),
                "security": [{"walletSignature": []}],
            }
        },
        "/account/info": account_read("The account: balance, deposit terms, batches", "Account"),
        "/account/ledger": account_read("Ledger entries, newest first", "LedgerPage", paged=True),
        "/account/history": account_read("Usage history, one entry per call, newest first", "HistoryPage", True),
        **_usage_paths(),
    }


API_DOC = ApiDoc(
    paths,
    (
        ChallengeRequest,
        Challenge,
        VerifyRequest,
        Token,
        LogoutAnswer,
        SessionList,
        SessionsEnded,
        ApiKeyRequest,
        ApiKeyAnswer,
        Account,
        LedgerPage,
        HistoryPage,
        UsageTotals,
    ),
)

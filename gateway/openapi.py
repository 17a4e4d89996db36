"""The OpenAPI 3.1 document of every HTTP route (``GET /openapi.json``, rendered at ``/docs``).

The bodies are pydantic models, so the document carries real JSON Schemas; the route handlers build
their answers as plain dicts, and ``make test`` runs schemathesis against the running stack to check
that every answer has a documented status and matches its schema (tests/integration/test_openapi.py).
Written out rather than derived from the routes: they are raw Starlette routes around the pipeline,
and docs/api.md's error shapes (a JSON-RPC error on some statuses, the HTTP error body on others) are
the part worth stating precisely.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from gateway.access.models import AccessRulesAnswer, AccessRulesRequest
from gateway.auth.models import (
    Account,
    ApiKeyAnswer,
    ApiKeyRequest,
    Challenge,
    ChallengeRequest,
    HistoryPage,
    LedgerPage,
    LogoutAnswer,
    SpendCapAnswer,
    SpendCapRequest,
    Token,
    VerifyRequest,
)
from gateway.auth.paging import MAX_LIMIT, MAX_OFFSET
from gateway.auth.usage_models import UsageTotals
from gateway.auth.usage_totals import EXPORT_MAX_ROWS, MAX_DAYS
from gateway.bulk.models import (
    BalancesAnswer,
    BalancesRequest,
    TokenBalancesAnswer,
    TokenBalancesRequest,
    TransactionsAnswer,
    TransactionsRequest,
)
from gateway.bulk.rules import BULK_CREDITS, MAX_BULK_ITEMS
from gateway.core.jsonrpc import MAX_BATCH
from gateway.core.patterns import SIGNAL_ID
from gateway.credits.models import ConfirmDepositRequest, ConfirmedDeposit
from gateway.signals.models import RecentSignals
from gateway.signals.rules import DEFAULT_RECENT_LIMIT, KINDS, MAX_RECENT_LIMIT
from gateway.webhooks.management import DEFAULT_DELIVERIES, MAX_DELIVERIES
from gateway.webhooks.models import (
    EmptyRequest,
    WebhookCreated,
    WebhookDeleted,
    WebhookDeliveryPage,
    WebhookList,
    WebhookPaused,
    WebhookReplayed,
    WebhookRequest,
    WebhookResumed,
    WebhookSecret,
)
from gateway.webhooks.rules import MAX_WEBHOOKS_PER_ACCOUNT
from gateway.x402.models import SettleAnswer, SettleRequest

API_VERSION = "0.2"


class _Open(BaseModel):
    model_config = ConfigDict(extra="allow")


class ErrorDetail(_Open):
    code: str = Field(description="A stable constant: INVALID_REQUEST, AUTH_FAILED, NONCE_REUSED, ...")
    message: str
    requestId: str | None = Field(None, description="The X-Request-Id of the response")
    data: Any = None
    rpcCode: int | None = Field(None, description="The JSON-RPC code, where the refusal has one (-32700, -32600, ...)")


class ErrorBody(_Open):
    """The HTTP error body of docs/api.md."""

    error: ErrorDetail


class RpcErrorObject(_Open):
    code: int
    message: str
    data: Any = None


class RpcRequest(BaseModel):
    jsonrpc: Literal["2.0"]
    id: str | int | None
    method: str = Field(min_length=1)
    params: list[Any] | dict[str, Any] | None = None


class RpcResponse(_Open):
    """A JSON-RPC response: ``result`` or ``error``. A 402 also carries the x402 fields beside them."""

    jsonrpc: Literal["2.0"]
    id: str | int | None
    result: Any = None
    error: RpcErrorObject | None = None


RpcBody = RpcRequest | list[RpcRequest]
RpcAnswer = RpcResponse | list[RpcResponse]


class Health(_Open):
    status: Literal["ok", "degraded", "starting"]
    paid_traffic_ready: bool
    agave_healthy: bool
    service_profile: dict[str, Any]
    timestamp: int


class Pricing(_Open):
    ok: bool
    credits_per_usdc: int
    classes: dict[str, Any]


class Capabilities(_Open):
    ok: bool
    service_profile: dict[str, Any]
    limits: dict[str, Any] = Field(
        description="what a request, a socket and a stream may hold: `jsonrpc`, `rest`, `websocket`, `grpc` "
        "(docs/api.md, Limits)"
    )


# -------------------------------------------------------------------------------------- the document

_ERRORS = {
    400: "malformed request: INVALID_REQUEST",
    401: "credentials presented but invalid: AUTH_FAILED",
    403: "replayed nonce (NONCE_REUSED), suspended account (ACCOUNT_SUSPENDED), refused by the account's "
    "access rules (ACCESS_DENIED, rpcCode -32030), or its daily spend cap reached (SPEND_CAP_REACHED, -32031)",
    404: "no account record: ACCOUNT_NOT_FOUND",
    405: "method not allowed on this path",
    413: "body too large: PAYLOAD_TOO_LARGE",
    429: "too many requests from this address: RATE_LIMITED, with Retry-After",
    500: "internal error: INTERNAL_ERROR, with requestId",
    503: "a store or the node is unavailable or starting: SERVICE_TEMPORARILY_UNAVAILABLE, with retry_after_secs",
}
_PAYMENT = "no credentials, or no account record: JSON-RPC -32002 with the deposit terms and the x402 fields"


def _ref(name: str) -> dict[str, str]:
    return {"$ref": f"#/components/schemas/{name}"}


def _json(schema: dict[str, Any], description: str) -> dict[str, Any]:
    return {"description": description, "content": {"application/json": {"schema": schema}}}


def _errors(*statuses: int, rpc: tuple[int, ...] = ()) -> dict[str, Any]:
    """Error answers: the HTTP error body, or a JSON-RPC error body for the statuses in ``rpc``."""
    out: dict[str, Any] = {}
    for status in statuses:
        schema = _ref("RpcResponse") if status in rpc else _ref("ErrorBody")
        out[str(status)] = _json(schema, _ERRORS.get(status, _PAYMENT))
    return out


def _operation(
    summary: str,
    ok: dict[str, Any],
    errors: dict[str, Any],
    *,
    body: str | None = None,
    secured: bool = False,
    params: list[dict[str, Any]] | None = None,
    tag: str,
    ok_status: int = 200,
) -> dict[str, Any]:
    op: dict[str, Any] = {"summary": summary, "tags": [tag], "responses": {str(ok_status): ok, **errors}}
    if body is not None:
        op["requestBody"] = {"required": True, "content": {"application/json": {"schema": _ref(body)}}}
    if params:
        op["parameters"] = params
    op["security"] = _ANY_CREDENTIAL if secured else []
    return op


_ANY_CREDENTIAL: list[dict[str, list[str]]] = [
    {"apiKeyHeader": []},
    {"apiKeyQuery": []},
    {"bearer": []},
    {"walletSignature": []},
]
_PAGE_PARAMS = [
    {"name": "limit", "in": "query", "schema": {"type": "integer", "minimum": 1, "maximum": MAX_LIMIT}},
    {"name": "offset", "in": "query", "schema": {"type": "integer", "minimum": 0, "maximum": MAX_OFFSET}},
    {"name": "cursor", "in": "query", "schema": {"type": "string"}, "description": "next_cursor of the last page"},
]
_MODELS: tuple[type[BaseModel], ...] = (
    ErrorBody,
    RpcRequest,
    RpcResponse,
    ChallengeRequest,
    Challenge,
    VerifyRequest,
    Token,
    LogoutAnswer,
    ApiKeyRequest,
    ApiKeyAnswer,
    Account,
    LedgerPage,
    HistoryPage,
    ConfirmDepositRequest,
    ConfirmedDeposit,
    SettleRequest,
    SettleAnswer,
    Health,
    Pricing,
    Capabilities,
    RecentSignals,
    WebhookRequest,
    EmptyRequest,
    WebhookCreated,
    WebhookList,
    WebhookSecret,
    WebhookDeleted,
    WebhookReplayed,
    WebhookResumed,
    WebhookPaused,
    WebhookDeliveryPage,
    BalancesRequest,
    TokenBalancesRequest,
    TransactionsRequest,
    BalancesAnswer,
    TokenBalancesAnswer,
    TransactionsAnswer,
    AccessRulesRequest,
    AccessRulesAnswer,
    SpendCapRequest,
    SpendCapAnswer,
    UsageTotals,
)


def _schemas() -> dict[str, Any]:
    schemas: dict[str, Any] = {}
    for model in _MODELS:
        schema = model.model_json_schema(ref_template="#/components/schemas/{model}")
        schemas.update(schema.pop("$defs", {}))
        schemas[model.__name__] = schema
    schemas["RpcBody"] = {
        "oneOf": [
            _ref("RpcRequest"),
            {"type": "array", "items": _ref("RpcRequest"), "minItems": 1, "maxItems": MAX_BATCH},
        ]
    }
    schemas["RpcAnswer"] = {"oneOf": [_ref("RpcResponse"), {"type": "array", "items": _ref("RpcResponse")}]}
    return schemas


_RPC_OR_HTTP_ERROR = {"anyOf": [_ref("RpcResponse"), _ref("ErrorBody")]}
#: A malformed JSON-RPC body on the JSON-RPC routes (docs/api.md, Errors).
_RPC_400 = {
    "400": _json(
        _ref("ErrorBody"),
        "malformed JSON-RPC: INVALID_REQUEST, rpcCode -32700 (not JSON) or -32600 (not a request or batch: empty, "
        "over 100 items, or another method than the route's)",
    )
}


def _rpc_operation() -> dict[str, Any]:
    return _operation(
        f"JSON-RPC 2.0: one call or a batch of up to {MAX_BATCH}, each billed by its method's class",
        _json(_ref("RpcAnswer"), "the node's (or the gateway's) JSON-RPC answers; errors of single items inside"),
        {
            **_RPC_400,
            **_errors(401, 403, 405, 413, 500),
            **_errors(402, 429, 502, 503, 504, rpc=(402, 429, 502, 503, 504)),
        },
        body="RpcBody",
        secured=True,
        tag="JSON-RPC",
    )


def _mcp_operation() -> dict[str, Any]:
    """``POST /mcp``: one MCP message (a JSON-RPC request, notification or response) per request."""

    def either(description: str) -> dict[str, Any]:
        return _json(_RPC_OR_HTTP_ERROR, description)

    ok = _json(_ref("RpcResponse"), "the MCP answer (a refused tool call is a result with isError: true)")
    ok["content"]["text/event-stream"] = {"schema": {"type": "string"}}  # when the client accepts only SSE
    op = _operation(
        "MCP (Model Context Protocol, streamable HTTP, stateless): initialize, ping, tools/list, tools/call; "
        "each tool call is one JSON-RPC call, billed by its method's class (docs/api.md, MCP)",
        ok,
        {
            "202": {"description": "a notification or a response: accepted, no body"},
            "400": either("not one JSON-RPC message, or an unsupported MCP-Protocol-Version: JSON-RPC error"),
            **_errors(401, 403, 413),
            **_errors(402, rpc=(402,)),
            "405": either("GET, DELETE (stateless: no stream, no session) and other verbs"),
            "406": _json(_ref("RpcResponse"), "the Accept header does not list application/json"),
            "415": _json(_ref("RpcResponse"), "the Content-Type is not application/json"),
            "500": either("internal error"),
            "503": either("a store is unavailable: retry shortly"),
        },
        body="RpcRequest",
        secured=True,
        tag="MCP",
    )
    return op


def _relay_operation(summary: str, body: bool) -> dict[str, Any]:
    return _operation(
        f"{summary} (bundle relay: present when a block engine is configured, as in the embedded default)",
        _json(_ref("RpcResponse"), "the block engine's JSON-RPC answer"),
        {
            **_RPC_400,
            **_errors(401, 403, 405, 413, 500),
            **_errors(402, 429, 502, 503, 504, rpc=(402, 429, 502, 503, 504)),
        },
        body="RpcRequest" if body else None,
        secured=True,
        tag="Bundle relay",
    )


_BULK = {
    "getBalances": ("addresses", "lamports of each address", "BalancesRequest", "BalancesAnswer"),
    "getTokenBalances": (
        "owners",
        "SPL Token and Token-2022 accounts of each owner, exact amounts",
        "TokenBalancesRequest",
        "TokenBalancesAnswer",
    ),
    "getTransactions": (
        "signatures",
        "each transaction (null when absent)",
        "TransactionsRequest",
        "TransactionsAnswer",
    ),
}


def _bulk_operation(name: str) -> dict[str, Any]:
    field, what, request, answer = _BULK[name]
    credits = BULK_CREDITS[name]
    return _operation(
        f"Bulk: {what}; up to {MAX_BULK_ITEMS} {field}, {credits} credit{'s' if credits > 1 else ''} per distinct "
        "valid one, reserved all at once; failed lookups refunded (docs/api.md, Bulk lookups)",
        _json(_ref(answer), "results and per-item errors, matched by key"),
        {
            **_errors(400, 401, 403, 405, 413, 500, 503),
            **_errors(402, rpc=(402,)),
            "429": _json(
                _ref("ErrorBody"),
                "the account's rate or concurrency limit: RATE_LIMITED or "
                "CONCURRENCY_LIMITED, with Retry-After; nothing charged",
            ),
            "502": _json(_ref("ErrorBody"), "the node answered none of the lookups: UPSTREAM_ERROR, nothing charged"),
        },
        body=request,
        secured=True,
        tag="Bulk",
    )


def _account_read(summary: str, answer: str, paged: bool = False) -> dict[str, Any]:
    return {
        "get": _operation(
            summary,
            _json(_ref(answer), "the resource"),
            {**_errors(400, 401, 403, 404, 429, 500, 503), **_errors(402, rpc=(402,))},
            secured=True,
            params=_PAGE_PARAMS if paged else None,
            tag="Account",
        )
    }


def _usage_paths() -> dict[str, Any]:
    """The account page's reads beyond docs/api.md's interface (docs/api.md, Usage totals, CSV exports)."""
    errors = {**_errors(400, 401, 403, 404, 429, 500, 503), **_errors(402, rpc=(402,))}
    days = {"name": "days", "in": "query", "schema": {"type": "integer", "minimum": 1, "maximum": MAX_DAYS}}
    export = [
        {"name": "limit", "in": "query", "schema": {"type": "integer", "minimum": 1, "maximum": EXPORT_MAX_ROWS}},
        {"name": "cursor", "in": "query", "schema": {"type": "string"}, "description": "start below this row"},
    ]
    csv = {"description": "CSV, newest first, streamed", "content": {"text/csv": {"schema": {"type": "string"}}}}
    return {
        "/account/usage/daily": {
            "get": _operation(
                "Credits, calls and refunds per UTC day, method class and method (beyond the interface)",
                _json(_ref("UsageTotals"), "the totals"),
                errors,
                secured=True,
                params=[days],
                tag="Account",
            )
        },
        "/account/usage.csv": {
            "get": _operation(
                "The usage history as a CSV file (beyond the interface)",
                csv,
                errors,
                secured=True,
                params=export,
                tag="Account",
            )
        },
        "/account/ledger.csv": {
            "get": _operation(
                "The ledger as a CSV file (beyond the interface)",
                csv,
                errors,
                secured=True,
                params=export,
                tag="Account",
            )
        },
    }


def openapi_document(server_url: str | None = None) -> dict[str, Any]:
    rest_errors = _errors(400, 413, 429, 500, 503)
    public = {"200": _json({}, "")}
    document: dict[str, Any] = {
        "openapi": "3.1.0",
        "info": {
            "title": "Solana credit gateway",
            "version": API_VERSION,
            "description": "A prepaid, credit-metered Solana JSON-RPC gateway. The full reference, with the "
            "JSON-RPC methods, prices, limits and error codes, is docs/api.md in the repository.",
        },
        "paths": {
            "/": {"post": _rpc_operation()},
            "/rpc": {"post": _rpc_operation()},
            "/mcp": {"post": _mcp_operation()},
            "/health": {
                "get": {
                    "summary": "Service health (HTTP 503 while starting)",
                    "tags": ["Public"],
                    "security": [],
                    "responses": {
                        "200": _json(_ref("Health"), "ok or degraded"),
                        "503": _json(_ref("Health"), "starting"),
                    },
                }
            },
            "/pricing": {"get": _pricing_operation()},
            "/capabilities": {"get": _public("What this deployment offers", "Capabilities")},
            "/signals/recent": {"get": _recent_signals_operation()},
            "/openapi.json": {"get": {**_public("This document", None), "responses": public}},
            "/auth/challenge": {
                "post": _operation(
                    "A challenge to sign (valid 300 s)",
                    _json(_ref("Challenge"), "the challenge"),
                    rest_errors,
                    body="ChallengeRequest",
                    tag="Session",
                )
            },
            "/auth/verify": {
                "post": _operation(
                    "A session token for a signed challenge (1 h, sliding)",
                    _json(_ref("Token"), "the token"),
                    {**rest_errors, **_errors(401)},
                    body="VerifyRequest",
                    tag="Session",
                )
            },
            "/auth/logout": {
                "post": {
                    **_operation(
                        "Revoke the session token",
                        _json(_ref("LogoutAnswer"), "revoked"),
                        {**rest_errors, **_errors(401), **_errors(402, rpc=(402,))},
                        tag="Session",
                    ),
                    "security": [{"bearer": []}],
                }
            },
            "/account/api-key": {
                "post": {
                    **_operation(
                        "Create the account's API key (shown once; rotates any previous key)",
                        _json(_ref("ApiKeyAnswer"), "the new key"),
                        {**rest_errors, **_errors(401, 403), **_errors(402, rpc=(402,))},
                        body="ApiKeyRequest",
                        tag="Account",
                    ),
                    "security": [{"walletSignature": []}],
                }
            },
            "/relay/sendBundle": {
                "post": _relay_operation("sendBundle: 1 to 5 signed transactions that tip; the bundle id", True)
            },
            "/relay/getBundleStatuses": {
                "post": _relay_operation("getBundleStatuses: slot and confirmation status per bundle id", True)
            },
            "/relay/getTipAccounts": {"get": _relay_operation("The tip accounts a bundle must tip", False)},
            "/relay/tipFloor": {"get": _relay_operation("Landed-tip percentiles (SOL)", False)},
            **{f"/bulk/{name}": {"post": _bulk_operation(name)} for name in _BULK},
            "/account/info": _account_read("The account: balance, deposit terms, batches", "Account"),
            "/account/access": {
                **_account_read("The account's access rules (any credential)", "AccessRulesAnswer"),
                "post": {
                    **_operation(
                        "Replace the account's access rules (the wallet's own signature only)",
                        _json(_ref("AccessRulesAnswer"), "the rules now in force"),
                        {**rest_errors, **_errors(401, 403, 404), **_errors(402, rpc=(402,))},
                        body="AccessRulesRequest",
                        tag="Account",
                    ),
                    "security": [{"walletSignature": []}],
                },
            },
            "/account/spend-cap": {
                **_account_read(
                    "The account's daily spend cap and today's spending (any credential)", "SpendCapAnswer"
                ),
                "post": {
                    **_operation(
                        "Set the account's daily spend cap (the wallet's own signature only)",
                        _json(_ref("SpendCapAnswer"), "the cap now in force"),
                        {**rest_errors, **_errors(401, 403, 404), **_errors(402, rpc=(402,))},
                        body="SpendCapRequest",
                        tag="Account",
                    ),
                    "security": [{"walletSignature": []}],
                },
            },
            "/account/ledger": _account_read("Ledger entries, newest first", "LedgerPage", paged=True),
            "/account/history": _account_read("Usage history, one entry per call, newest first", "HistoryPage", True),
            **_usage_paths(),
            **_webhook_paths(),
            "/x402/settle": {"post": _settle_operation()},
            "/x402/blockhash": {"get": _blockhash_operation()},
            "/account/confirm-deposit": {
                "post": _operation(
                    "Credit a finalized USDC deposit now (to the transfer's authority wallet)",
                    _json(_ref("ConfirmedDeposit"), "credited, or already processed"),
                    {**rest_errors, **_errors(401, 403, 502), **_errors(402, rpc=(402,))},
                    body="ConfirmDepositRequest",
                    secured=True,
                    tag="Account",
                )
            },
        },
        "components": {
            "schemas": _schemas(),
            "securitySchemes": {
                "apiKeyHeader": {"type": "apiKey", "in": "header", "name": "X-Api-Key"},
                "apiKeyQuery": {"type": "apiKey", "in": "query", "name": "api-key"},
                "bearer": {"type": "http", "scheme": "bearer", "description": "session token from /auth/verify"},
                "walletSignature": {
                    "type": "apiKey",
                    "in": "header",
                    "name": "X-Signature",
                    "description": "with X-Pubkey, X-Timestamp and X-Nonce: an Ed25519 signature of "
                    "ledger-svc:v2:{METHOD}:{PATH}:{TIMESTAMP}:{NONCE}:{BODY_HASH}",
                },
            },
        },
    }
    if server_url:
        document["servers"] = [{"url": server_url}]
    return document


def _settle_operation() -> dict[str, Any]:
    """``POST /x402/settle``: unauthenticated; every refusal is the HTTP error body with ``data.reason``."""
    return _operation(
        "x402: settle a USDC payment transaction to the deposit wallet, self-paid or sponsored (the service "
        "co-signs as fee payer); credit it afterwards with /account/confirm-deposit (docs/api.md, x402)",
        _json(_ref("SettleAnswer"), "broadcast; confirmed, or accepted and not yet confirmed (see message)"),
        {
            "400": _json(
                _ref("ErrorBody"),
                "INVALID_REQUEST; data.reason: unparseable_body, invalid_base64, invalid_transaction, "
                "wrong_destination, wrong_mint, amount_below_minimum, no_payment_instruction, "
                "unsignable_authority, sponsored_whitelist_violation, missing_signature, duplicate_settlement",
            ),
            **_errors(405, 413, 429, 500),
            "502": _json(
                _ref("ErrorBody"),
                "UPSTREAM_ERROR: the network rejected the transaction (data.reason preflight_rejected, with the "
                "node's reason), it landed and failed (transaction_failed), or the node could not be reached",
            ),
            "503": _json(
                _ref("ErrorBody"),
                "SETTLEMENT_NOT_CONFIGURED (settlement off, or the fee payer has no SOL for sponsored payments), "
                "or SERVICE_TEMPORARILY_UNAVAILABLE (the database)",
            ),
        },
        body="SettleRequest",
        tag="x402",
    )


def _blockhash_operation() -> dict[str, Any]:
    """``GET /x402/blockhash``: beyond the interface; unauthenticated, one cached node read per replica."""
    answer = {
        "type": "object",
        "required": ["blockhash", "last_valid_block_height"],
        "properties": {"blockhash": {"type": "string"}, "last_valid_block_height": {"type": "integer"}},
    }
    return _operation(
        "x402: a recent blockhash to build a payment on, for a client with no RPC of its own (beyond the "
        "interface; at most 2 s old, shared by every caller; docs/api.md, x402)",
        _json(answer, "the node's confirmed blockhash"),
        {
            **_errors(405, 429, 500),
            "502": _json(_ref("ErrorBody"), "UPSTREAM_ERROR: the node gave no blockhash"),
            "503": _json(_ref("ErrorBody"), "SETTLEMENT_NOT_CONFIGURED: settlement is off here"),
        },
        tag="x402",
    )


def _recent_signals_operation() -> dict[str, Any]:
    params = [
        {
            "name": "limit",
            "in": "query",
            "schema": {"type": "integer", "minimum": 1, "maximum": MAX_RECENT_LIMIT, "default": DEFAULT_RECENT_LIMIT},
        },
        {"name": "kind", "in": "query", "schema": {"type": "string", "enum": list(KINDS)}},
        {
            "name": "since_slot",
            "in": "query",
            "schema": {"type": "integer", "minimum": 0, "maximum": 2**64 - 2},
            "description": "only events of a later slot",
        },
        {
            "name": "before",
            "in": "query",
            "schema": {"type": "string", "pattern": SIGNAL_ID},
            "description": "only events before this id (the next page of an answer with more: true)",
        },
    ]
    return {
        "summary": "Recent signal events, newest first: free, no credentials (docs/api.md, Signals)",
        "tags": ["Public"],
        "security": [],
        "parameters": params,
        "responses": {
            "200": _json(_ref("RecentSignals"), "the events"),
            "400": _json(_ref("ErrorBody"), "a bad parameter: INVALID_REQUEST"),
            "429": _json(
                _ref("ErrorBody"), "the per-address limit (ip_limits signals): RATE_LIMITED, with Retry-After"
            ),
            "503": _json(_ref("ErrorBody"), "the signal log (Redis) is unavailable: SERVICE_TEMPORARILY_UNAVAILABLE"),
        },
    }


def _webhook_paths() -> dict[str, Any]:
    """``/webhooks`` and its per-id routes (docs/api.md, Webhooks): any credential, an account needed."""
    errors = {**_errors(400, 401, 403, 405, 413, 429, 500, 503), **_errors(402, rpc=(402,))}
    per_id = {**errors, "404": _json(_ref("ErrorBody"), "no such webhook of this account: NOT_FOUND")}
    id_param = [{"name": "id", "in": "path", "required": True, "schema": {"type": "integer", "minimum": 1}}]

    def per(operation_id: str, summary: str, answer: str, body: str | None = "EmptyRequest") -> dict[str, Any]:
        ok = _json(_ref(answer), "done")
        op = _operation(summary, ok, per_id, body=body, params=id_param, secured=True, tag="Webhooks")
        return {"operationId": operation_id, **op}

    created = _json(_ref("WebhookCreated"), "created")
    created["links"] = {  # what to call on the webhook just created (schemathesis follows them too)
        name: {"operationId": name, "parameters": {"id": "$response.body#/id"}} for name in _PER_WEBHOOK
    }

    return {
        "/webhooks": {
            "post": _operation(
                f"Subscribe a URL to events (at most {MAX_WEBHOOKS_PER_ACCOUNT} per account; a positive balance "
                "needed: 402 -32010 without); the answer carries the signing secret, shown this once",
                created,
                errors,
                body="WebhookRequest",
                secured=True,
                tag="Webhooks",
                ok_status=201,
            ),
            "get": _operation(
                "The account's webhooks, newest first, with delivery counts (never secrets)",
                _json(_ref("WebhookList"), "the webhooks"),
                errors,
                secured=True,
                tag="Webhooks",
            ),
        },
        "/webhooks/{id}/rotate-secret": {
            "post": per("rotateWebhookSecret", "A new signing secret, used from the next delivery", "WebhookSecret")
        },
        "/webhooks/{id}/replay": {
            "post": per("replayWebhook", "Retry every dead delivery from its first attempt", "WebhookReplayed")
        },
        "/webhooks/{id}/resume": {
            "post": per("resumeWebhook", "Resume a paused webhook's deliveries", "WebhookResumed")
        },
        "/webhooks/{id}/pause": {
            "post": per(
                "pauseWebhook",
                "Pause a webhook: its queued deliveries wait for a resume (beyond the interface)",
                "WebhookPaused",
            )
        },
        "/webhooks/{id}/deliveries": {"get": _deliveries_operation(per_id, id_param)},
        "/webhooks/{id}": {
            "delete": per(
                "deleteWebhook", "Delete a webhook; its waiting deliveries are cancelled", "WebhookDeleted", None
            )
        },
    }


_PER_WEBHOOK = (
    "rotateWebhookSecret",
    "replayWebhook",
    "resumeWebhook",
    "pauseWebhook",
    "webhookDeliveries",
    "deleteWebhook",
)


def _deliveries_operation(per_id: dict[str, Any], id_param: list[dict[str, Any]]) -> dict[str, Any]:
    """``GET /webhooks/{id}/deliveries`` (docs/api.md, Webhooks; beyond the interface)."""
    params = [
        *id_param,
        {
            "name": "limit",
            "in": "query",
            "schema": {"type": "integer", "minimum": 1, "maximum": MAX_DELIVERIES, "default": DEFAULT_DELIVERIES},
        },
        {"name": "cursor", "in": "query", "description": "a page's next_cursor", "schema": {"type": "string"}},
    ]
    ok = _json(_ref("WebhookDeliveryPage"), "the webhook's events, newest first")
    summary = "A webhook's recent deliveries with the receiver's last answer (beyond the interface)"
    op = _operation(summary, ok, per_id, body=None, params=params, secured=True, tag="Webhooks")
    return {"operationId": "webhookDeliveries", **op}


def _pricing_operation() -> dict[str, Any]:
    operation = _public("Prices: credits per class, which methods are available", "Pricing")
    limited = _json(_ref("ErrorBody"), "the per-address limit (ip_limits pricing): RATE_LIMITED, with Retry-After")
    return {**operation, "responses": {**operation["responses"], "429": limited}}


def _public(summary: str, schema: str | None) -> dict[str, Any]:
    ok = _json(_ref(schema), "the document") if schema else _json({}, "")
    return {"summary": summary, "tags": ["Public"], "security": [], "responses": {"200": ok}}

"""What every feature's part of the OpenAPI document is built from: the error answers, the JSON-RPC
bodies and one operation's shape (docs/api.md, Errors).

Written out rather than derived from the routes: they are raw Starlette routes around the pipeline,
and docs/api.md's error shapes (a JSON-RPC error on some statuses, the HTTP error body on others) are
the part worth stating precisely. Each feature describes its own paths in its ``api_doc.py`` with
these helpers; ``gateway/transports/openapi.py`` assembles the parts.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from gateway.core.jsonrpc import MAX_BATCH


@dataclass(frozen=True)
class ApiDoc:
    """One feature's part of the document: its paths, the models they name, and schemas no model gives."""

    paths: Callable[[], dict[str, Any]]
    models: tuple[type[BaseModel], ...] = ()
    schemas: Mapping[str, Any] = field(default_factory=dict)


class Open(BaseModel):
    """An answer that may carry more fields than documented."""

    model_config = ConfigDict(extra="allow")


class ErrorDetail(Open):
    code: str = Field(description="A stable constant: INVALID_REQUEST, AUTH_FAILED, NONCE_REUSED, ...")
    message: str
    requestId: str | None = Field(None, description="The X-Request-Id of the response")
    data: Any = None
    rpcCode: int | None = Field(None, description="The JSON-RPC code, where the refusal has one (-32700, -32600, ...)")


class ErrorBody(Open):
    """The HTTP error body of docs/api.md."""

    error: ErrorDetail


class RpcErrorObject(Open):
    code: int
    message: str
    data: Any = None


class RpcRequest(BaseModel):
    jsonrpc: Literal["2.0"]
    id: str | int | None
    method: str = Field(min_length=1)
    params: list[Any] | dict[str, Any] | None = None


class RpcResponse(Open):
    """A JSON-RPC response: ``result`` or ``error``. A 402 also carries the x402 fields beside them."""

    jsonrpc: Literal["2.0"]
    id: str | int | None
    result: Any = None
    error: RpcErrorObject | None = None


#: The models every part may name, first in the document's schemas.
KERNEL_MODELS: tuple[type[BaseModel], ...] = (ErrorBody, RpcRequest, RpcResponse)

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

ANY_CREDENTIAL: list[dict[str, list[str]]] = [
    {"apiKeyHeader": []},
    {"apiKeyQuery": []},
    {"bearer": []},
    {"walletSignature": []},
]


def ref(name: str) -> dict[str, str]:
    return {"$ref": f"#/components/schemas/{name}"}


def json_answer(schema: dict[str, Any], description: str) -> dict[str, Any]:
    return {"description": description, "content": {"application/json": {"schema": schema}}}


def errors(*statuses: int, rpc: tuple[int, ...] = ()) -> dict[str, Any]:
    """Error answers: the HTTP error body, or a JSON-RPC error body for the statuses in ``rpc``."""
    out: dict[str, Any] = {}
    for status in statuses:
        schema = ref("RpcResponse") if status in rpc else ref("ErrorBody")
        out[str(status)] = json_answer(schema, _ERRORS.get(status, _PAYMENT))
    return out


def rest_errors() -> dict[str, Any]:
    """What any REST route may answer before its own refusals."""
    return errors(400, 413, 429, 500, 503)


def operation(
    summary: str,
    ok: dict[str, Any],
    refusals: dict[str, Any],
    *,
    body: str | None = None,
    secured: bool = False,
    params: list[dict[str, Any]] | None = None,
    tag: str,
    ok_status: int = 200,
) -> dict[str, Any]:
    op: dict[str, Any] = {"summary": summary, "tags": [tag], "responses": {str(ok_status): ok, **refusals}}
    if body is not None:
        op["requestBody"] = {"required": True, "content": {"application/json": {"schema": ref(body)}}}
    if params:
        op["parameters"] = params
    op["security"] = ANY_CREDENTIAL if secured else []
    return op


#: A body or an answer of the JSON-RPC routes: one call or a batch.
RPC_SCHEMAS: dict[str, Any] = {
    "RpcBody": {
        "oneOf": [
            ref("RpcRequest"),
            {"type": "array", "items": ref("RpcRequest"), "minItems": 1, "maxItems": MAX_BATCH},
        ]
    },
    "RpcAnswer": {"oneOf": [ref("RpcResponse"), {"type": "array", "items": ref("RpcResponse")}]},
}


def rpc_route_errors() -> dict[str, Any]:
    """The refusals of a route that answers JSON-RPC (``/``, ``/rpc``, the bundle relay)."""
    return {
        "400": json_answer(
            ref("ErrorBody"),
            "malformed JSON-RPC: INVALID_REQUEST, rpcCode -32700 (not JSON) or -32600 (not a request or batch: "
            "empty, over 100 items, or another method than the route's)",
        ),
        **errors(401, 403, 405, 413, 500),
        **errors(402, 429, 502, 503, 504, rpc=(402, 429, 502, 503, 504)),
    }

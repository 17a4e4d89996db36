"""The OpenAPI 3.1 document of every HTTP route (``GET /openapi.json``, rendered at ``/docs``), assembled
from each feature's part (its ``api_doc.py``, built with :mod:`gateway.core.api_doc`).

The bodies are pydantic models, so the document carries real JSON Schemas; the route handlers build
their answers as plain dicts, and ``make test`` runs schemathesis against the running stack to check
that every answer has a documented status and matches its schema (tests/integration/test_openapi.py).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from gateway.app.features import FEATURES
from gateway.core.api_doc import KERNEL_MODELS, ApiDoc, json_answer
from gateway.mcp.api_doc import API_DOC as MCP
from gateway.rpc.api_doc import API_DOC as RPC

API_VERSION = "0.2"


def _paths() -> dict[str, Any]:
    """The document's own route (``/docs``, its rendering, is a page: not described)."""
    this = {"summary": "This document", "tags": ["Public"], "security": [], "responses": {"200": json_answer({}, "")}}
    return {"/openapi.json": {"get": this}}


#: ``/openapi.json`` in the document.
OPENAPI = ApiDoc(_paths)

#: The parts, in the order the routes are matched (gateway/transports/http.py): the transports' own
#: routes (JSON-RPC, this document, MCP), then every feature's (gateway/app/features.py; the public
#: documents' first).
PARTS: tuple[ApiDoc, ...] = (RPC, OPENAPI, MCP, *(part for feature in FEATURES for part in feature.api))

_SECURITY_SCHEMES = {
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
}


def openapi_document(server_url: str | None = None, parts: Iterable[ApiDoc] = PARTS) -> dict[str, Any]:
    parts = tuple(parts)
    paths: dict[str, Any] = {}
    for part in parts:
        for path, operations in part.paths().items():
            if path in paths:
                raise ValueError(f"{path} is described twice")  # a feature's path left in another's part
            paths[path] = operations
    document: dict[str, Any] = {
        "openapi": "3.1.0",
        "info": {
            "title": "Solana credit gateway",
            "version": API_VERSION,
            "description": "A prepaid, credit-metered Solana JSON-RPC gateway. The full reference, with the "
            "JSON-RPC methods, prices, limits and error codes, is docs/api.md in the repository.",
        },
        "paths": paths,
        "components": {"schemas": _schemas(parts), "securitySchemes": _SECURITY_SCHEMES},
    }
    if server_url:
        document["servers"] = [{"url": server_url}]
    return document


def _schemas(parts: tuple[ApiDoc, ...]) -> dict[str, Any]:
    schemas: dict[str, Any] = {}
    for model in (*KERNEL_MODELS, *(model for part in parts for model in part.models)):
        schema = model.model_json_schema(ref_template="#/components/schemas/{model}")
        schemas.update(schema.pop("$defs", {}))
        schemas[model.__name__] = schema
    for part in parts:
        schemas.update(part.schemas)
    return schemas

"""JSON-RPC over HTTP (``/``, ``/rpc``) in the OpenAPI document (built with :mod:`gateway.core.api_doc`)."""

from __future__ import annotations

from typing import Any

from gateway.core.api_doc import RPC_SCHEMAS, ApiDoc, json_answer, operation, ref, rpc_route_errors
from gateway.core.jsonrpc import MAX_BATCH

#: Where JSON-RPC is served over HTTP (docs/api.md).
RPC_PATHS = ("/", "/rpc")


def rpc_operation() -> dict[str, Any]:
    return operation(
        f"JSON-RPC 2.0: one call or a batch of up to {MAX_BATCH}, each billed by its method's class",
        json_answer(ref("RpcAnswer"), "the node's (or the gateway's) JSON-RPC answers; errors of single items inside"),
        rpc_route_errors(),
        body="RpcBody",
        secured=True,
        tag="JSON-RPC",
    )


def paths() -> dict[str, Any]:
    return {path: {"post": rpc_operation()} for path in RPC_PATHS}


API_DOC = ApiDoc(paths, schemas=RPC_SCHEMAS)

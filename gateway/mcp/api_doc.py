"""``POST /mcp`` in the OpenAPI document (built with :mod:`gateway.core.api_doc`): one MCP message (a
JSON-RPC request, notification or response) per request; the SDK answers some refusals as JSON-RPC errors."""

from __future__ import annotations

from typing import Any

from gateway.core.api_doc import ApiDoc, errors, json_answer, operation, ref
from gateway.mcp.server import MCP_PATH

_RPC_OR_HTTP_ERROR = {"anyOf": [ref("RpcResponse"), ref("ErrorBody")]}


def mcp_operation() -> dict[str, Any]:
    def either(description: str) -> dict[str, Any]:
        return json_answer(_RPC_OR_HTTP_ERROR, description)

    ok = json_answer(ref("RpcResponse"), "the MCP answer (a refused tool call is a result with isError: true)")
    ok["content"]["text/event-stream"] = {"schema": {"type": "string"}}  # when the client accepts only SSE
    return operation(
        "MCP (Model Context Protocol, streamable HTTP, stateless): initialize, ping, tools/list, tools/call; "
        "each tool call is one JSON-RPC call, billed by its method's class (docs/api.md, MCP)",
        ok,
        {
            "202": {"description": "a notification or a response: accepted, no body"},
            "400": either("not one JSON-RPC message, or an unsupported MCP-Protocol-Version: JSON-RPC error"),
            **errors(401, 403, 413),
            **errors(402, rpc=(402,)),
            "405": either("GET, DELETE (stateless: no stream, no session) and other verbs"),
            "406": json_answer(ref("RpcResponse"), "the Accept header does not list application/json"),
            "415": json_answer(ref("RpcResponse"), "the Content-Type is not application/json"),
            "500": either("internal error"),
            "503": either("a store is unavailable: retry shortly"),
        },
        body="RpcRequest",
        secured=True,
        tag="MCP",
    )


def paths() -> dict[str, Any]:
    return {MCP_PATH: {"post": mcp_operation()}}


API_DOC = ApiDoc(paths)

"""The bundle relay's routes (``/relay/*``) in the OpenAPI document (built with :mod:`gateway.core.api_doc`):
present when a block engine is configured, as in the embedded default."""

from __future__ import annotations

from typing import Any

from gateway.core.api_doc import ApiDoc, json_answer, operation, ref, rpc_route_errors
from gateway.sending.routes import RELAY_ROUTES

#: What each relay route answers.
_SUMMARIES = {
    "/relay/sendBundle": "sendBundle: 1 to 5 signed transactions that tip; the bundle id",
    "/relay/getBundleStatuses": "getBundleStatuses: slot and confirmation status per bundle id",
    "/relay/getTipAccounts": "The tip accounts a bundle must tip",
    "/relay/tipFloor": "Landed-tip percentiles (SOL)",
}


def _relay_operation(summary: str, body: bool) -> dict[str, Any]:
    return operation(
        f"{summary} (bundle relay: present when a block engine is configured, as in the embedded default)",
        json_answer(ref("RpcResponse"), "the block engine's JSON-RPC answer"),
        rpc_route_errors(),
        body="RpcRequest" if body else None,
        secured=True,
        tag="Bundle relay",
    )


def paths() -> dict[str, Any]:
    return {
        path: {verb.lower(): _relay_operation(_SUMMARIES[path], verb == "POST")}
        for path, (verb, _) in RELAY_ROUTES.items()
    }


API_DOC = ApiDoc(paths)

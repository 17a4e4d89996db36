"""The JSON-RPC method table: name -> handler, with mainnet's parameter rules and error shapes.

Handlers are synchronous (the chain is); `RpcDispatcher.handle` takes a decoded JSON-RPC payload
(single or batch) and returns the response payload, or None when there is nothing to answer. The
envelope handling is `JsonRpcEndpoint`, shared with the block engine's endpoints."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from solders.pubkey import Pubkey
from solders.signature import Signature

from devnode.chain import Chain
from devnode.errors import INVALID_REQUEST, METHOD_NOT_FOUND, MIN_CONTEXT_SLOT_NOT_REACHED, RpcError, invalid_params
from devnode.rpc.accounts import AccountMethods
from devnode.rpc.base import NodeInfo
from devnode.rpc.blocks import BlockMethods
from devnode.rpc.cluster import ClusterMethods
from devnode.rpc.tokens import TokenMethods
from devnode.rpc.transactions import TransactionMethods

Handler = Callable[[list[Any]], Any]


class JsonRpcEndpoint:
    """JSON-RPC 2.0 envelopes over the `m_<method>` handlers of a subclass (the node's, the block engine's)."""

    def __init__(self) -> None:
        self.methods: dict[str, Handler] = {
            name[len("m_") :]: getattr(self, name) for name in dir(self) if name.startswith("m_")
        }

    def handle(self, payload: Any) -> Any:
        """A decoded request or batch in, the response (or None for notifications only) out."""
        if isinstance(payload, list):
            if not payload:
                return _error(None, RpcError(INVALID_REQUEST, "Invalid request"))
            out = [r for r in (self._one(p) for p in payload) if r is not None]
            return out or None
        return self._one(payload)

    def _one(self, req: Any) -> dict[str, Any] | None:
        if not isinstance(req, dict) or req.get("jsonrpc") != "2.0" or not isinstance(req.get("method"), str):
            req_id = req.get("id") if isinstance(req, dict) else None
            return _error(req_id, RpcError(INVALID_REQUEST, "Invalid request"))
        req_id = req.get("id")
        is_notification = "id" not in req
        params = req.get("params", [])
        try:
            handler = self.methods.get(req["method"])
            if handler is None:
                raise RpcError(METHOD_NOT_FOUND, "Method not found")
            if params is None:
                params = []
            if not isinstance(params, list):
                raise invalid_params("Invalid params: invalid type: map, expected a sequence")
            self._check_params(params)
            result = handler(params)
        except RpcError as exc:
            return None if is_notification else _error(req_id, exc)
        except Exception as exc:  # a bug must still answer the client
            return None if is_notification else _error(req_id, RpcError(-32603, f"Internal error: {exc}"))
        return None if is_notification else {"jsonrpc": "2.0", "result": result, "id": req_id}

    def _check_params(self, params: list[Any]) -> None:
        """Checks every method of the endpoint shares; raises `RpcError`."""


class RpcDispatcher(AccountMethods, TokenMethods, TransactionMethods, BlockMethods, ClusterMethods, JsonRpcEndpoint):
    """Answers JSON-RPC requests against a `Chain`."""

    def __init__(self, chain: Chain, info: NodeInfo, airdrop: Callable[[Pubkey, int], Signature] | None = None) -> None:
        self.chain = chain
        self.info = info
        self._airdrop = airdrop or chain.airdrop
        self._leader_schedule: tuple[int, dict[str, list[int]]] | None = None
        super().__init__()

    def _check_params(self, params: list[Any]) -> None:
        for p in params:
            wanted = p.get("minContextSlot") if isinstance(p, dict) else None
            if isinstance(wanted, int) and wanted > self.chain.slot:
                raise RpcError(
                    MIN_CONTEXT_SLOT_NOT_REACHED,
                    "Minimum context slot has not been reached",
                    {"contextSlot": self.chain.slot},
                )


def _error(req_id: Any, exc: RpcError) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "error": exc.to_json(), "id": req_id}

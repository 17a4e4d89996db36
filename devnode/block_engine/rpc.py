"""The block engine's JSON-RPC methods, in the shapes of Jito's API.

`/api/v1/bundles`: sendBundle, getBundleStatuses, getInflightBundleStatuses, getTipAccounts, and
simulateBundle (a Jito-Solana RPC method, served here beside the others; no pre/post accounts).
`/api/v1/transactions`: sendTransaction, always with skip_preflight (as Jito does); with
`?bundleOnly=true` the transaction is sent as a one-transaction bundle instead and its bundle id is
kept for the `x-bundle-id` response header.
"""

from __future__ import annotations

from typing import Any

from solders.transaction import VersionedTransaction

from devnode.block_engine.engine import INVALID, LANDED, MAX_BUNDLE_TXS, BlockEngine, BundleRejected, QueueFull
from devnode.block_engine.tips import TIP_ACCOUNTS
from devnode.chain.constants import COMMITMENT_NAMES, FINALIZED
from devnode.errors import INTERNAL_ERROR, RpcError, invalid_params
from devnode.rpc.dispatch import JsonRpcEndpoint
from devnode.rpc.params import config, required
from devnode.rpc.transactions import decode_transaction

MAX_STATUS_IDS = 5


class _EngineMethods(JsonRpcEndpoint):
    def __init__(self, engine: BlockEngine) -> None:
        self.engine = engine
        super().__init__()

    def _submit(self, txs: list[VersionedTransaction]) -> str:
        try:
            return self.engine.submit(txs).bundle_id
        except BundleRejected as exc:
            raise invalid_params(str(exc)) from exc
        except QueueFull as exc:
            raise RpcError(INTERNAL_ERROR, str(exc)) from exc

    def _ctx(self, value: Any) -> dict[str, Any]:
        return {"context": {"slot": self.engine.chain.slot}, "value": value}


def _encoding(params: list[Any]) -> str:
    encoding = config(params, 1).get("encoding") or "base58"
    if encoding not in ("base58", "base64"):
        raise invalid_params(f"Invalid params: unsupported encoding: {encoding}. Supported encodings: base58, base64")
    return str(encoding)


def _bundle_ids(params: list[Any]) -> list[str]:
    ids = required(params, 0, "bundle_ids")
    if not isinstance(ids, list) or not all(isinstance(i, str) for i in ids):
        raise invalid_params("Invalid params: expected a list of bundle ids")
    if not 1 <= len(ids) <= MAX_STATUS_IDS:
        raise invalid_params(f"Invalid params: 1 to {MAX_STATUS_IDS} bundle ids")
    return ids


class BundlesRpc(_EngineMethods):
    """`POST /api/v1/bundles`."""

    def m_sendBundle(self, params: list[Any]) -> Any:
        encoded = required(params, 0, "transactions")
        if not isinstance(encoded, list) or not 1 <= len(encoded) <= MAX_BUNDLE_TXS:
            raise invalid_params(f"Invalid params: a bundle is a list of 1 to {MAX_BUNDLE_TXS} signed transactions")
        encoding = _encoding(params)
        return self._submit([decode_transaction(tx, encoding) for tx in encoded])

    def m_getInflightBundleStatuses(self, params: list[Any]) -> Any:
        out = []
        for bid in _bundle_ids(params):
            bundle = self.engine.get(bid)
            status = INVALID if bundle is None else bundle.status
            out.append({"bundle_id": bid, "status": status, "landed_slot": None if bundle is None else bundle.slot})
        return self._ctx(out)

    def m_getBundleStatuses(self, params: list[Any]) -> Any:
        out: list[dict[str, Any] | None] = []
        chain = self.engine.chain
        for bid in _bundle_ids(params):
            bundle = self.engine.get(bid)
            if bundle is None or bundle.status != LANDED or bundle.slot is None:
                out.append(None)
                continue
            out.append(
                {
                    "bundle_id": bid,
                    "transactions": [str(tx.signatures[0]) for tx in bundle.transactions],
                    "slot": bundle.slot,
                    "confirmation_status": COMMITMENT_NAMES[min(chain.slot - bundle.slot, FINALIZED)],
                    "err": {"Ok": None},
                }
            )
        return self._ctx(out)

    def m_getTipAccounts(self, params: list[Any]) -> Any:
        return [str(a) for a in TIP_ACCOUNTS]

    def m_simulateBundle(self, params: list[Any]) -> Any:
        request = required(params, 0, "rpc_bundle_request")
        encoded = request.get("encodedTransactions") if isinstance(request, dict) else None
        if not isinstance(encoded, list) or not 1 <= len(encoded) <= MAX_BUNDLE_TXS:
            raise invalid_params(f"Invalid params: encodedTransactions holds 1 to {MAX_BUNDLE_TXS} transactions")
        cfg = config(params, 1)
        encoding = cfg.get("transactionEncoding") or "base64"
        txs = [decode_transaction(tx, encoding) for tx in encoded]
        results = self.engine.rehearse(
            txs,
            sig_verify=not cfg.get("skipSigVerify", False),
            replace_blockhash=bool(cfg.get("replaceRecentBlockhash", False)),
        )
        summary: Any = "succeeded"
        err = results[-1][0]["err"]
        if err is not None:
            sig = str(txs[len(results) - 1].signatures[0])
            summary = {"failed": {"error": {"TransactionFailure": [sig, err]}, "tx_signature": sig}}
        return self._ctx(
            {
                "summary": summary,
                "transactionResults": [
                    {
                        "err": value["err"],
                        "logs": value["logs"],
                        "preExecutionAccounts": None,
                        "postExecutionAccounts": None,
                        "unitsConsumed": value["unitsConsumed"],
                        "returnData": value["returnData"],
                    }
                    for value, _ in results
                ],
            }
        )


class TransactionsRpc(_EngineMethods):
    """`POST /api/v1/transactions`; one per request, since `bundle_only` comes from its query."""

    def __init__(self, engine: BlockEngine, *, bundle_only: bool) -> None:
        self.bundle_only = bundle_only
        self.bundle_ids: list[str] = []
        super().__init__(engine)

    def m_sendTransaction(self, params: list[Any]) -> Any:
        tx = decode_transaction(required(params, 0, "transaction"), _encoding(params))
        if self.bundle_only:
            self.bundle_ids.append(self._submit([tx]))
            return str(tx.signatures[0])
        return str(self.engine.chain.send(tx, skip_preflight=True))

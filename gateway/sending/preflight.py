"""The signature-verifying simulation run before a send (``sendSmartTransaction`` with ``simulate:
true``, ``sendAndConfirm`` with ``skipPreflight: false``), and how its failure is answered.

A failed preflight is refunded, so its answer carries the transaction error alone: the simulation's
logs, compute units, return data, accounts and inner instructions stay out, or the refund would
buy the ``simulateTransaction`` that is priced for them (docs/api.md, Sending).
"""

from __future__ import annotations

from typing import Any

from gateway.core.errors import RpcError
from gateway.core.transactions import WireTx
from gateway.node.http import Upstream, rpc_call

SIMULATION = {"encoding": "base64", "sigVerify": True, "commitment": "processed"}


async def simulate(node: Upstream, tx: WireTx, timeout_s: float) -> dict[str, Any] | None:
    """The node's simulation of ``tx`` (its ``value``), None when the answer holds none; raises as
    :func:`gateway.node.http.rpc_call` does."""
    result = await rpc_call(node, "simulateTransaction", [tx.base64, dict(SIMULATION)], timeout_s)
    value = result.get("value") if isinstance(result, dict) else None
    return value if isinstance(value, dict) else None


def simulation_failed(err: Any, detail: str = "") -> RpcError:
    """-32002 for a simulation that failed with the transaction error ``err``: that error and nothing else."""
    return RpcError(-32002, f"Transaction simulation failed: {err}{detail}", {"err": err})

"""What every method group shares: the node's version and stake figures, `NodeInfo`, and
`MethodGroup`, the base of the handler classes `RpcDispatcher` combines (a handler is an `m_<method>`
method reading `self.chain`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from solders.account import Account
from solders.pubkey import Pubkey

from devnode.chain import Chain
from devnode.encoding import encode_account
from devnode.rpc.params import data_slice

API_VERSION = "2.3.0"
TOTAL_STAKE = 100_000 * 10**9


@dataclass(frozen=True)
class NodeInfo:
    """Where the node listens (for getClusterNodes) and how fast its slots are."""

    host: str
    rpc_port: int
    ws_port: int
    slot_ms: int
    tpu_quic_port: int | None = None  # None: no TPU listener


class MethodGroup:
    """A set of `m_<method>` handlers; `RpcDispatcher` inherits them all and sets these attributes."""

    chain: Chain
    info: NodeInfo

    def _ctx(self, value: Any) -> dict[str, Any]:
        return {"context": {"apiVersion": API_VERSION, "slot": self.chain.slot}, "value": value}

    def _keyed(self, key: Pubkey, account: Account, encoding: str, cfg: dict[str, Any]) -> dict[str, Any]:
        return {
            "account": encode_account(account, encoding, data_slice(cfg), self.chain.get_account),
            "pubkey": str(key),
        }

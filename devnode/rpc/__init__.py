"""The devnode's JSON-RPC methods, grouped by what they read: `accounts`, `tokens`, `transactions`
(blockhashes, fees, sending, history), `blocks` and `cluster`. `dispatch.RpcDispatcher` combines the
groups into the method table and answers requests; `params` holds the parameter helpers they share."""

from devnode.rpc.base import NodeInfo
from devnode.rpc.dispatch import RpcDispatcher

__all__ = ["NodeInfo", "RpcDispatcher"]

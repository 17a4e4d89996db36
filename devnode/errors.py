"""JSON-RPC errors in the shapes Agave nodes send (codes, messages and `data` where mainnet has it)."""

from __future__ import annotations

from typing import Any

_ABSENT: Any = object()

PARSE_ERROR = -32700
INVALID_REQUEST = -32600
METHOD_NOT_FOUND = -32601
INVALID_PARAMS = -32602
INTERNAL_ERROR = -32603
BLOCK_CLEANED_UP = -32001  # mainnet's code; docs/api.md wants -32004 for the 'cleaned up' answer
SEND_TX_PREFLIGHT_FAILURE = -32002
TX_SIGNATURE_VERIFICATION_FAILURE = -32003
BLOCK_NOT_AVAILABLE = -32004
NODE_UNHEALTHY = -32005
UNSUPPORTED_TX_VERSION = -32015
MIN_CONTEXT_SLOT_NOT_REACHED = -32016


class RpcError(Exception):
    """Raised by handlers; the server turns it into a JSON-RPC error object."""

    def __init__(self, code: int, message: str, data: Any = _ABSENT) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.data = data

    def to_json(self) -> dict[str, Any]:
        err: dict[str, Any] = {"code": self.code, "message": self.message}
        if self.data is not _ABSENT:
            err["data"] = self.data
        return err


def invalid_params(message: str) -> RpcError:
    return RpcError(INVALID_PARAMS, message)


def node_unhealthy(num_slots_behind: int | None) -> RpcError:
    """Agave's NodeUnhealthy: behind by a known number of slots, or unhealthy for a reason it does not count."""
    message = "Node is unhealthy" if num_slots_behind is None else f"Node is behind by {num_slots_behind} slots"
    return RpcError(NODE_UNHEALTHY, message, {"numSlotsBehind": num_slots_behind})


def block_not_available(slot: int) -> RpcError:
    return RpcError(BLOCK_NOT_AVAILABLE, f"Block not available for slot {slot}")


def block_cleaned_up(slot: int, first_available: int) -> RpcError:
    return RpcError(
        BLOCK_NOT_AVAILABLE,
        f"Block {slot} cleaned up, does not exist on node. First available block: {first_available}",
    )


def unsupported_version(version: int) -> RpcError:
    return RpcError(
        UNSUPPORTED_TX_VERSION,
        f"Transaction version ({version}) is not supported by the requesting client. Please try the request "
        f'again with the following configuration parameter: "maxSupportedTransactionVersion": {version}',
    )


def preflight_failure(message: str, sim_value: dict[str, Any]) -> RpcError:
    return RpcError(SEND_TX_PREFLIGHT_FAILURE, f"Transaction simulation failed: {message}", sim_value)

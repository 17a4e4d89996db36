"""The MCP tool catalog: each tool's name, one-line description, input JSON Schema, and how its
arguments become one JSON-RPC request. Pure: no SDK, no I/O.

A tool is only a spelling of a JSON-RPC call. The MCP transport (:mod:`gateway.mcp.server`)
turns the ``(method, params)`` a tool gives into the body of a :class:`gateway.pipeline.stages.Call` and
runs the JSON-RPC stages, so what a tool may do, what it costs and how it fails are the JSON-RPC
method's, never the tool's. ``rpc`` reaches every method; the named tools are there so that an agent
finds the common reads, sends, fee estimates and history without knowing Solana's parameter shapes.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

JsonSchema = dict[str, Any]


class ToolArgumentError(ValueError):
    """The arguments do not make a request (a required one missing, a wrong type): refused free."""


@dataclass(frozen=True, slots=True)
class Tool:
    name: str
    description: str
    input_schema: JsonSchema
    build: Callable[[Mapping[str, Any]], tuple[str, Any]]  # arguments -> (JSON-RPC method, params or None)

    def request(self, arguments: Mapping[str, Any]) -> tuple[str, Any]:
        """The JSON-RPC ``(method, params)`` of a call with ``arguments`` (``params`` None: omitted)."""
        for name in self.input_schema.get("required", ()):
            if arguments.get(name) is None:
                raise ToolArgumentError(f"{self.name}: argument '{name}' is required")
        if not _within_json_integers(arguments):
            raise ToolArgumentError(f"{self.name}: an integer argument is outside {JSON_INT_MIN} to {JSON_INT_MAX}")
        return self.build(arguments)


#: The integers a JSON-RPC body holds exactly (orjson's range, as ``POST /`` reads them). The SDK parses MCP
#: messages into Python integers of any size; one beyond these cannot become the call's JSON-RPC body.
JSON_INT_MIN = -(2**63)
JSON_INT_MAX = 2**64 - 1


def _within_json_integers(arguments: Mapping[str, Any]) -> bool:
    """Whether every integer in ``arguments`` is within the JSON-RPC body's range (walked without
    recursion: any depth the SDK's parser let through)."""
    stack: list[Any] = [arguments]
    while stack:
        value = stack.pop()
        if isinstance(value, Mapping):
            stack.extend(value.values())
        elif isinstance(value, list):
            stack.extend(value)
        elif isinstance(value, int) and not JSON_INT_MIN <= value <= JSON_INT_MAX:
            return False
    return True


_STRING = {"type": "string"}
_COMMITMENT = {
    "type": "string",
    "enum": ["processed", "confirmed", "finalized"],
    "description": "Commitment level (the node's default when omitted).",
}
_ADDRESS = {"type": "string", "description": "Account address, base58."}
_SIGNATURE = {"type": "string", "description": "Transaction signature, base58."}


def _schema(properties: Mapping[str, Any], required: tuple[str, ...] = ()) -> JsonSchema:
    schema: JsonSchema = {"type": "object", "properties": dict(properties), "additionalProperties": False}
    if required:
        schema["required"] = list(required)
    return schema


def _options(arguments: Mapping[str, Any], *names: str, **defaults: Any) -> dict[str, Any]:
    """The JSON-RPC config object: ``defaults``, then the arguments among ``names`` that were given."""
    options = dict(defaults)
    options.update({name: arguments[name] for name in names if arguments.get(name) is not None})
    return options


def _with_options(first: list[Any], options: dict[str, Any]) -> list[Any]:
    return [*first, options] if options else first


def _rpc(arguments: Mapping[str, Any]) -> tuple[str, Any]:
    method = arguments.get("method")
    if not isinstance(method, str) or not method:
        raise ToolArgumentError("rpc: 'method' must be a JSON-RPC method name")
    params = arguments.get("params")
    if params is not None and not isinstance(params, list | dict):
        raise ToolArgumentError("rpc: 'params' must be an array or an object, as JSON-RPC requires")
    return method, params


def _get_balance(a: Mapping[str, Any]) -> tuple[str, Any]:
    return "getBalance", _with_options([a["address"]], _options(a, "commitment"))


def _get_account_info(a: Mapping[str, Any]) -> tuple[str, Any]:
    return "getAccountInfo", [a["address"], _options(a, "encoding", "commitment", encoding="base64")]


def _get_slot(a: Mapping[str, Any]) -> tuple[str, Any]:
    return "getSlot", _with_options([], _options(a, "commitment"))


def _get_transaction(a: Mapping[str, Any]) -> tuple[str, Any]:
    options = _options(
        a, "encoding", "commitment", "maxSupportedTransactionVersion", encoding="json", maxSupportedTransactionVersion=0
    )
    return "getTransaction", [a["signature"], options]


def _get_signatures_for_address(a: Mapping[str, Any]) -> tuple[str, Any]:
    return "getSignaturesForAddress", _with_options(
        [a["address"]], _options(a, "limit", "before", "until", "commitment")
    )


def _send_transaction(a: Mapping[str, Any]) -> tuple[str, Any]:
    options = _options(a, "skipPreflight", "preflightCommitment", "maxRetries", encoding="base64")
    return "sendTransaction", [a["transaction"], options]


def _send_and_confirm(a: Mapping[str, Any]) -> tuple[str, Any]:
    return "sendAndConfirm", [a["transaction"], _options(a, "skipPreflight", encoding="base64")]


def _get_send_status(a: Mapping[str, Any]) -> tuple[str, Any]:
    return "getSendStatus", [a["signature"]]


def _suggest_priority_fee(a: Mapping[str, Any]) -> tuple[str, Any]:
    return "suggestPriorityFee", [_options(a, "urgency", "accounts")]


def _get_transaction_history(a: Mapping[str, Any]) -> tuple[str, Any]:
    return "getTransactionHistory", _with_options([a["address"]], _options(a, "limit"))


def _execute_snipe(a: Mapping[str, Any]) -> tuple[str, Any]:
    return "executeSnipe", [_options(a, "mint", "amount_sol", "slippage_bps", "priority_fee_micro_lamports")]


def _execute_sell(a: Mapping[str, Any]) -> tuple[str, Any]:
    return "executeSell", [_options(a, "mint", "token_amount", "slippage_bps", "priority_fee_micro_lamports")]


_TX_BASE64 = {"type": "string", "description": "Signed transaction, base64."}
_MINT = {"type": "string", "description": "The pump.fun token's mint address, base58."}
_SLIPPAGE = {
    "type": "integer",
    "minimum": 0,
    "maximum": 10_000,
    "description": "Allowed price move in basis points (default 500 = 5%).",
}
_CU_PRICE = {
    "type": "integer",
    "minimum": 0,
    "maximum": 100_000_000,
    "description": "Compute-unit price in micro-lamports (default 100000).",
}

TOOLS: tuple[Tool, ...] = (
    Tool(
        "rpc",
        "Call any Solana JSON-RPC method of this gateway by name with its params; billed as that method.",
        _schema(
            {
                "method": {"type": "string", "description": "JSON-RPC method name, e.g. getBlockHeight."},
                "params": {
                    "type": ["array", "object"],
                    "description": "The method's JSON-RPC params, exactly as the JSON-RPC API takes them.",
                },
            },
            ("method",),
        ),
        _rpc,
    ),
    Tool(
        "getBalance",
        "Get the SOL balance of an address, in lamports (1 SOL = 1e9 lamports).",
        _schema({"address": _ADDRESS, "commitment": _COMMITMENT}, ("address",)),
        _get_balance,
    ),
    Tool(
        "getAccountInfo",
        "Get an account's owner, lamports, data and executable flag (null if the account does not exist).",
        _schema(
            {
                "address": _ADDRESS,
                "encoding": {
                    "type": "string",
                    "enum": ["base64", "base58", "base64+zstd", "jsonParsed"],
                    "description": "Encoding of the account data (default base64).",
                },
                "commitment": _COMMITMENT,
            },
            ("address",),
        ),
        _get_account_info,
    ),
    Tool(
        "getSlot",
        "Get the current slot of the chain.",
        _schema({"commitment": _COMMITMENT}),
        _get_slot,
    ),
    Tool(
        "getTransaction",
        "Get a confirmed transaction by signature (null if the node does not have it).",
        _schema(
            {
                "signature": _SIGNATURE,
                "encoding": {
                    "type": "string",
                    "enum": ["json", "jsonParsed", "base64", "base58"],
                    "description": "Encoding of the transaction (default json).",
                },
                "maxSupportedTransactionVersion": {
                    "type": "integer",
                    "minimum": 0,
                    "description": "Newest transaction version to return (default 0).",
                },
                "commitment": _COMMITMENT,
            },
            ("signature",),
        ),
        _get_transaction,
    ),
    Tool(
        "getSignaturesForAddress",
        "List the signatures of transactions that touched an address, newest first.",
        _schema(
            {
                "address": _ADDRESS,
                "limit": {"type": "integer", "minimum": 1, "maximum": 1000, "description": "At most this many."},
                "before": {**_STRING, "description": "Start searching backwards from this signature."},
                "until": {**_STRING, "description": "Search until this signature."},
                "commitment": _COMMITMENT,
            },
            ("address",),
        ),
        _get_signatures_for_address,
    ),
    Tool(
        "sendTransaction",
        "Submit a signed transaction (base64) to the node; returns its signature, not its confirmation.",
        _schema(
            {
                "transaction": _TX_BASE64,
                "skipPreflight": {"type": "boolean", "description": "Skip the node's simulation."},
                "preflightCommitment": _COMMITMENT,
                "maxRetries": {"type": "integer", "minimum": 0, "description": "Node-side resend attempts."},
            },
            ("transaction",),
        ),
        _send_transaction,
    ),
    Tool(
        "sendAndConfirm",
        "Send a signed transaction (base64) over every path at once and wait for its outcome "
        "(confirmed, failed or unknown); charged by outcome.",
        _schema(
            {
                "transaction": _TX_BASE64,
                "skipPreflight": {
                    "type": "boolean",
                    "description": "Skip the simulation (default true); false simulates first.",
                },
            },
            ("transaction",),
        ),
        _send_and_confirm,
    ),
    Tool(
        "getSendStatus",
        "Get the state of a transaction sent with sendAndConfirm (ask before sending anew after a timeout).",
        _schema({"signature": _SIGNATURE}, ("signature",)),
        _get_send_status,
    ),
    Tool(
        "suggestPriorityFee",
        "Suggest a compute-unit price (micro-lamports) to pay now, optionally for the accounts a transaction writes.",
        _schema(
            {
                "urgency": {
                    "type": "string",
                    "enum": ["low", "medium", "high", "critical"],
                    "description": "25th, 50th, 75th or 90th percentile of recent fees (default medium).",
                },
                "accounts": {
                    "type": "array",
                    "items": _STRING,
                    "maxItems": 128,
                    "description": "Writable accounts (base58) to scope the estimate to.",
                },
            }
        ),
        _suggest_priority_fee,
    ),
    Tool(
        "getTransactionHistory",
        "Get an address's recent transactions, each decoded into transfers, programs and a one-line summary.",
        _schema(
            {
                "address": _ADDRESS,
                "limit": {"type": "integer", "minimum": 1, "maximum": 100, "description": "At most this many (10)."},
            },
            ("address",),
        ),
        _get_transaction_history,
    ),
    Tool(
        "executeSnipe",
        "Build an unsigned pump.fun buy (v0, base64) of a token's bonding curve for your wallet, spending up to "
        "amount_sol; you sign and send it. Billed: build fee plus a share of amount_sol.",
        _schema(
            {
                "mint": _MINT,
                "amount_sol": {
                    "type": ["number", "string"],
                    "description": "SOL to spend, fees included (e.g. 0.05), at most 9 decimals.",
                },
                "slippage_bps": _SLIPPAGE,
                "priority_fee_micro_lamports": _CU_PRICE,
            },
            ("mint", "amount_sol"),
        ),
        _execute_snipe,
    ),
    Tool(
        "executeSell",
        "Build an unsigned pump.fun sell (v0, base64) of tokens your wallet holds into their bonding curve; you "
        "sign and send it. Billed: build fee plus a share of the SOL it returns.",
        _schema(
            {
                "mint": _MINT,
                "token_amount": {
                    "type": ["integer", "string"],
                    "description": "Raw base units to sell (6 decimals: 1 token = 1000000), a positive integer.",
                },
                "slippage_bps": _SLIPPAGE,
                "priority_fee_micro_lamports": _CU_PRICE,
            },
            ("mint", "token_amount"),
        ),
        _execute_sell,
    ),
)

BY_NAME: dict[str, Tool] = {tool.name: tool for tool in TOOLS}


def jsonrpc_request(method: str, params: Any, request_id: int = 1) -> dict[str, Any]:
    """The JSON-RPC request document of one tool call."""
    document: dict[str, Any] = {"jsonrpc": "2.0", "id": request_id, "method": method}
    if params is not None:
        document["params"] = params
    return document

"""Mainnet-shaped JSON rendering of accounts, transactions and status metas."""

from __future__ import annotations

import base64
import re
from collections.abc import Callable
from typing import Any

import base58
import orjson
from solders.account import Account
from solders.message import Message, MessageV0, MessageV1
from solders.pubkey import Pubkey
from solders.transaction import VersionedTransaction
from solders.transaction_status import TransactionErrorType, UiTransactionStatusMeta

from devnode.errors import RpcError, invalid_params, unsupported_version
from devnode.parsing import parse_instruction
from devnode.records import TxRecord
from devnode.tokens import (
    decode_mint,
    decode_token_account,
    parsed_mint_info,
    parsed_token_account_info,
    program_name,
)

U64_MAX = 2**64 - 1
ACCOUNT_ENCODINGS = ("base64", "base58", "jsonParsed", "base64+zstd", "binary")
TX_ENCODINGS = ("json", "jsonParsed", "base64", "base58", "binary")
GetAccount = Callable[[Pubkey], Account | None]


# ---------------------------------------------------------------- errors


def error_json(err: TransactionErrorType | None) -> Any:
    """A solders TransactionError in mainnet's JSON shape (e.g. {"InstructionError": [0, {"Custom": 1}]})."""
    if err is None:
        return None
    return orjson.loads(UiTransactionStatusMeta(err, 0, [], []).to_json())["err"]


def _words(name: str) -> str:
    return re.sub(r"(?<!^)([A-Z])", r" \1", name).lower()


def error_display(err: Any) -> str:
    """Agave's Display text of a TransactionError (used in preflight failure messages)."""
    fixed = {
        "BlockhashNotFound": "Blockhash not found",
        "AlreadyProcessed": "This transaction has already been processed",
        "AccountNotFound": "Attempt to debit an account but found no record of a prior credit.",
        "InsufficientFundsForFee": "Insufficient funds for fee",
        "SignatureFailure": "Transaction did not pass signature verification",
        "ProgramAccountNotFound": "Attempt to load a program that does not exist",
    }
    if isinstance(err, str):
        return fixed.get(err, _words(err))
    if isinstance(err, dict) and "InstructionError" in err:
        index, inner = err["InstructionError"]
        if isinstance(inner, dict) and "Custom" in inner:
            return f"Error processing Instruction {index}: custom program error: {inner['Custom']:#x}"
        return f"Error processing Instruction {index}: {_words(str(inner))}"
    if isinstance(err, dict) and "InsufficientFundsForRent" in err:
        idx = err["InsufficientFundsForRent"].get("account_index")
        return f"Transaction results in an account ({idx}) with insufficient funds for rent"
    return str(err)


# ---------------------------------------------------------------- accounts


def check_account_encoding(encoding: str) -> None:
    if encoding not in ACCOUNT_ENCODINGS:
        raise invalid_params(f"Invalid params: unknown variant `{encoding}`, expected one of {ACCOUNT_ENCODINGS}")
    if encoding == "base64+zstd":
        raise invalid_params("Invalid params: base64+zstd encoding is not supported by this devnode; use base64")


def _slice(data: bytes, data_slice: dict[str, Any] | None) -> bytes:
    if not data_slice:
        return data
    offset = int(data_slice.get("offset", 0))
    length = int(data_slice.get("length", 0))
    return data[offset : offset + length]


def _parsed_data(account: Account, get_account: GetAccount) -> dict[str, Any] | None:
    token = decode_token_account(account)
    data_len = len(bytes(account.data))
    if token is not None:
        mint = decode_mint(get_account(token.mint))
        if mint is None:
            return None
        return {
            "parsed": {"info": parsed_token_account_info(token, mint.decimals, account.owner), "type": "account"},
            "program": program_name(account.owner),
            "space": data_len,
        }
    mint_state = decode_mint(account)
    if mint_state is not None:
        return {
            "parsed": {"info": parsed_mint_info(mint_state, account.owner), "type": "mint"},
            "program": program_name(account.owner),
            "space": data_len,
        }
    return None


def encode_account(
    account: Account,
    encoding: str,
    data_slice: dict[str, Any] | None = None,
    get_account: GetAccount | None = None,
) -> dict[str, Any]:
    """The UiAccount JSON object. jsonParsed falls back to base64 for data it cannot parse, as mainnet."""
    raw = bytes(account.data)
    data: Any
    if encoding == "jsonParsed" and get_account is not None and not data_slice:
        data = _parsed_data(account, get_account)
        if data is None:
            data = [base64.b64encode(raw).decode(), "base64"]
    elif encoding in ("base58", "binary"):
        sliced = _slice(raw, data_slice)
        if len(sliced) > 128:
            raise RpcError(
                -32600,
                "Encoded binary (base 58) data should be less than 128 bytes, please use Base64 encoding.",
            )
        text = base58.b58encode(sliced).decode()
        data = text if encoding == "binary" else [text, "base58"]
    else:
        data = [base64.b64encode(_slice(raw, data_slice)).decode(), "base64"]
    return {
        "data": data,
        "executable": account.executable,
        "lamports": account.lamports,
        "owner": str(account.owner),
        "rentEpoch": account.rent_epoch,
        "space": len(raw),
    }


# ---------------------------------------------------------------- transactions


def _header(msg: Message | MessageV0 | MessageV1) -> dict[str, int]:
    h = msg.header
    return {
        "numReadonlySignedAccounts": h.num_readonly_signed_accounts,
        "numReadonlyUnsignedAccounts": h.num_readonly_unsigned_accounts,
        "numRequiredSignatures": h.num_required_signatures,
    }


def _lookups(msg: Message | MessageV0 | MessageV1) -> list[dict[str, Any]] | None:
    if not isinstance(msg, MessageV0):
        return None
    return [
        {
            "accountKey": str(lk.account_key),
            "readonlyIndexes": list(lk.readonly_indexes),
            "writableIndexes": list(lk.writable_indexes),
        }
        for lk in msg.address_table_lookups
    ]


def _json_message(tx: VersionedTransaction) -> dict[str, Any]:
    msg = tx.message
    out: dict[str, Any] = {
        "accountKeys": [str(k) for k in msg.account_keys],
        "header": _header(msg),
        "instructions": [
            {
                "accounts": list(ix.accounts),
                "data": base58.b58encode(bytes(ix.data)).decode(),
                "programIdIndex": ix.program_id_index,
                "stackHeight": None,
            }
            for ix in msg.instructions
        ],
        "recentBlockhash": str(msg.recent_blockhash),
    }
    lookups = _lookups(msg)
    if lookups is not None:
        out["addressTableLookups"] = lookups
    return out


def _parsed_message(rec: TxRecord) -> dict[str, Any]:
    msg = rec.transaction.message
    n_static = len(msg.account_keys)
    keys = rec.account_keys
    account_keys = [
        {
            "pubkey": str(k),
            "signer": rec.signer[i],
            "source": "transaction" if i < n_static else "lookupTable",
            "writable": rec.writable[i],
        }
        for i, k in enumerate(keys)
    ]
    instructions = [
        parse_instruction(keys[ix.program_id_index], [keys[a] for a in bytes(ix.accounts)], bytes(ix.data), None)
        for ix in msg.instructions
    ]
    out: dict[str, Any] = {
        "accountKeys": account_keys,
        "instructions": instructions,
        "recentBlockhash": str(msg.recent_blockhash),
    }
    lookups = _lookups(msg)
    if lookups is not None:
        out["addressTableLookups"] = lookups
    return out


def _parsed_inner(rec: TxRecord) -> list[dict[str, Any]]:
    keys = rec.account_keys
    out = []
    for group in rec.inner_instructions:
        parsed = []
        for ix in group["instructions"]:
            try:
                program = keys[ix["programIdIndex"]]
                accounts = [keys[a] for a in ix["accounts"]]
            except IndexError:
                parsed.append(ix)
                continue
            parsed.append(parse_instruction(program, accounts, base58.b58decode(ix["data"]), ix.get("stackHeight")))
        out.append({"index": group["index"], "instructions": parsed})
    return out


def render_meta(rec: TxRecord, parsed: bool) -> dict[str, Any]:
    meta: dict[str, Any] = {
        "computeUnitsConsumed": rec.compute_units,
        "err": rec.err,
        "fee": rec.fee,
        "innerInstructions": _parsed_inner(rec) if parsed else rec.inner_instructions,
        "logMessages": rec.log_messages,
        "postBalances": rec.post_balances,
        "postTokenBalances": rec.post_token_balances,
        "preBalances": rec.pre_balances,
        "preTokenBalances": rec.pre_token_balances,
        "rewards": [],
        "status": {"Ok": None} if rec.err is None else {"Err": rec.err},
    }
    if not parsed:
        meta["loadedAddresses"] = {
            "readonly": [str(k) for k in rec.loaded_readonly],
            "writable": [str(k) for k in rec.loaded_writable],
        }
    if rec.return_data is not None:
        meta["returnData"] = rec.return_data
    return meta


def check_tx_encoding(encoding: str) -> None:
    if encoding not in TX_ENCODINGS:
        raise invalid_params(f"Invalid params: unknown variant `{encoding}`, expected one of {TX_ENCODINGS}")


def render_transaction(rec: TxRecord, encoding: str) -> Any:
    """The `transaction` field of getTransaction / getBlock in the requested encoding."""
    if encoding in ("base64", "base58", "binary"):
        raw = bytes(rec.transaction)
        if encoding == "base64":
            return [base64.b64encode(raw).decode(), "base64"]
        text = base58.b58encode(raw).decode()
        return text if encoding == "binary" else [text, "base58"]
    signatures = [str(s) for s in rec.transaction.signatures]
    if encoding == "jsonParsed":
        return {"message": _parsed_message(rec), "signatures": signatures}
    return {"message": _json_message(rec.transaction), "signatures": signatures}


def check_version(rec: TxRecord, max_version: int | None) -> None:
    """Mainnet refuses versioned transactions to clients that did not say they understand them."""
    version = rec.version
    if version is not None and (max_version is None or version > max_version):
        raise unsupported_version(version)


def render_tx_with_meta(rec: TxRecord, encoding: str, max_version: int | None) -> dict[str, Any]:
    """{transaction, meta[, version]} as in getBlock's `transactions` entries."""
    check_version(rec, max_version)
    out: dict[str, Any] = {
        "meta": render_meta(rec, encoding == "jsonParsed"),
        "transaction": render_transaction(rec, encoding),
    }
    if max_version is not None:
        out["version"] = "legacy" if rec.version is None else rec.version
    return out


def return_data_json(program_id: Pubkey, data: bytes) -> dict[str, Any] | None:
    if not data:
        return None
    return {"data": [base64.b64encode(data).decode(), "base64"], "programId": str(program_id)}


__all__ = [
    "U64_MAX",
    "check_account_encoding",
    "check_tx_encoding",
    "check_version",
    "encode_account",
    "error_display",
    "error_json",
    "render_meta",
    "render_transaction",
    "render_tx_with_meta",
    "return_data_json",
]

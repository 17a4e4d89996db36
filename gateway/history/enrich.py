"""Transaction history, enriched: what each transaction of an address moved and called, in words. Pure.

``getTransactionHistory`` lists an address's signatures (the node's ``getSignaturesForAddress``) and
fetches each transaction (``getTransaction``, ``jsonParsed``); everything else is read here from the
node's JSON, with no guess about what a program "meant":

- ``sol_transfers``: per account, ``postBalances - preBalances`` in lamports (signed, integers). The
  fee is not a transfer: it is given once, in ``fee``, and added back to the fee payer's change, so a
  failed transaction (which only paid its fee) moved no SOL.
- ``token_transfers``: per token account, ``postTokenBalances - preTokenBalances`` in base units,
  with the account's ``owner``, ``mint`` and ``decimals``. ``amount`` is the signed raw change as a
  decimal integer string (a u64 difference does not fit every JSON reader's integers, the node itself
  gives token amounts as strings) and ``ui_amount`` the same scaled by ``decimals``, as a decimal
  string: no floats anywhere.
- ``program_interactions``: each program invoked, top-level or inner (CPI), in order of first use,
  with its well-known name (:data:`PROGRAM_NAMES`) and the instructions seen (the node's parsed
  ``type``, or read from the data for Compute Budget and pump.fun).
- ``summary``: one line; ``explanation``: one or two plain-English sentences.

A transaction the node listed but no longer returns (it left the node's retention between the two
calls) is ``found: false``, with what the signature list said (slot, block time, error) and
``fee: null`` (unknown).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import base58

from gateway.core.params import node_amount, node_integer
from pumpfun.events import EVENT_IX_TAG_LE
from pumpfun.ids import (
    ASSOCIATED_TOKEN_PROGRAM_ID,
    COMPUTE_BUDGET_PROGRAM_ID,
    FEE_PROGRAM_ID,
    MPL_TOKEN_METADATA_PROGRAM_ID,
    PUMP_AMM_PROGRAM_ID,
    PUMP_PROGRAM_ID,
    SYSTEM_PROGRAM_ID,
    TOKEN_2022_PROGRAM_ID,
    TOKEN_PROGRAM_ID,
    USDC_MINT,
    WSOL_MINT,
)
from pumpfun.instructions import (
    BUY_DISCRIMINATOR,
    BUY_EXACT_SOL_IN_DISCRIMINATOR,
    CREATE_DISCRIMINATOR,
    CREATE_POOL_DISCRIMINATOR,
    CREATE_V2_DISCRIMINATOR,
    MIGRATE_DISCRIMINATOR,
    SELL_DISCRIMINATOR,
)

DEFAULT_HISTORY_LIMIT = 10
MAX_HISTORY_LIMIT = 100
LAMPORTS_PER_SOL_DECIMALS = 9

MEMO_PROGRAM_ID = "MemoSq4gqABAXKb96qnH8TysNcWxMyWCqXgDLGmfcHr"
MEMO_V1_PROGRAM_ID = "Memo1UhkJRfHyvLMcVucJwxXeuD728EqVDDwQDxFMNo"
PUMP = str(PUMP_PROGRAM_ID)

#: Programs named in ``program_interactions`` (others are listed with ``name: null``).
PROGRAM_NAMES: dict[str, str] = {
    str(SYSTEM_PROGRAM_ID): "System",
    str(TOKEN_PROGRAM_ID): "Token",
    str(TOKEN_2022_PROGRAM_ID): "Token-2022",
    str(ASSOCIATED_TOKEN_PROGRAM_ID): "Associated Token",
    str(COMPUTE_BUDGET_PROGRAM_ID): "Compute Budget",
    MEMO_PROGRAM_ID: "Memo",
    MEMO_V1_PROGRAM_ID: "Memo",
    PUMP: "pump.fun",
    str(PUMP_AMM_PROGRAM_ID): "PumpSwap",
    str(FEE_PROGRAM_ID): "pump.fun Fees",
    str(MPL_TOKEN_METADATA_PROGRAM_ID): "Metaplex Token Metadata",
}
#: Mints named in summaries.
MINT_NAMES: dict[str, str] = {str(USDC_MINT): "USDC", str(WSOL_MINT): "wSOL"}

#: Compute Budget instructions by their first data byte.
_COMPUTE_BUDGET = {
    1: "requestHeapFrame",
    2: "setComputeUnitLimit",
    3: "setComputeUnitPrice",
    4: "setLoadedAccountsDataSizeLimit",
}
#: pump.fun and PumpSwap instructions by their Anchor discriminator (``event``: an ``emit_cpi!`` self-CPI).
_ANCHOR = {
    CREATE_DISCRIMINATOR: "create",
    CREATE_V2_DISCRIMINATOR: "create_v2",
    BUY_DISCRIMINATOR: "buy",
    BUY_EXACT_SOL_IN_DISCRIMINATOR: "buy_exact_sol_in",
    SELL_DISCRIMINATOR: "sell",
    MIGRATE_DISCRIMINATOR: "migrate",
    CREATE_POOL_DISCRIMINATOR: "create_pool",
    EVENT_IX_TAG_LE: "event",
}
_ANCHOR_PROGRAMS = frozenset({PUMP, str(PUMP_AMM_PROGRAM_ID)})


@dataclass(frozen=True, slots=True)
class HistoryQuery:
    """The checked params of ``getTransactionHistory``."""

    address: str
    limit: int = DEFAULT_HISTORY_LIMIT


# -- the node's answers --------------------------------------------------------------------------------


def signature_list(answer: Any) -> list[dict[str, Any]] | None:
    """The entries of a ``getSignaturesForAddress`` answer, or None when it is not one."""
    if not isinstance(answer, list):
        return None
    if not all(isinstance(e, dict) and isinstance(e.get("signature"), str) for e in answer):
        return None
    return answer


def transaction_request(signature: str) -> list[Any]:
    """The ``getTransaction`` params for one history entry: parsed JSON, v0 transactions, confirmed."""
    config = {"encoding": "jsonParsed", "maxSupportedTransactionVersion": 0, "commitment": "confirmed"}
    return [signature, config]


def history(
    listed: Sequence[dict[str, Any]], transactions: Sequence[Any], failures: Sequence[str | None] | None = None
) -> dict[str, Any]:
    """The ``getTransactionHistory`` result: one entry per listed signature, newest first as listed.
    ``failures``: per transaction, the node's error when its lookup failed (its entry says so)."""
    failed = failures or [None] * len(listed)
    entries = [
        entry(sig, tx if isinstance(tx, dict) else None, failure)
        for sig, tx, failure in zip(listed, transactions, failed, strict=True)
    ]
    return {"transactions": entries, "count": len(entries)}


def entry(listed: dict[str, Any], tx: dict[str, Any] | None, failure: str | None = None) -> dict[str, Any]:
    """One history entry: the signature list's facts, and the transaction's enrichment when found."""
    signature = str(listed.get("signature"))
    if tx is None:
        slot = _int_or_none(listed.get("slot"))
        why = (
            f"The node lists this transaction{_in_slot(slot)} but could not return its details ({failure}); "
            "its share of the price was refunded."
            if failure is not None
            else f"The node lists this transaction{_in_slot(slot)} but no longer returns its details "
            "(it is outside the node's retention window)."
        )
        return {
            "signature": signature,
            "found": False,
            "slot": slot,
            "block_time": _int_or_none(listed.get("blockTime")),
            "fee": None,
            "error": listed.get("err"),
            "enriched": {
                "token_transfers": [],
                "sol_transfers": [],
                "program_interactions": [],
                "summary": "Not available from the node",
            },
            "explanation": why,
        }
    meta = _dict(tx.get("meta"))
    slot = _int_or_none(tx.get("slot"))
    fee = _int_or_none(meta.get("fee"))
    error = meta.get("err")
    enriched = enrich(tx)
    return {
        "signature": signature,
        "found": True,
        "slot": slot,
        "block_time": _int_or_none(tx.get("blockTime")),
        "fee": fee,
        "error": error,
        "enriched": enriched,
        "explanation": explain(tx, enriched),
    }


# -- enrichment ----------------------------------------------------------------------------------------


def enrich(tx: dict[str, Any]) -> dict[str, Any]:
    """The ``enriched`` object of one ``getTransaction`` answer (``json`` or ``jsonParsed``)."""
    sol = sol_transfers(tx)
    tokens = token_transfers(tx)
    programs = program_interactions(tx)
    enriched: dict[str, Any] = {
        "token_transfers": tokens,
        "sol_transfers": sol,
        "program_interactions": programs,
        "summary": "",
    }
    enriched["summary"] = summarize(tx, enriched)
    return enriched


def account_keys(tx: dict[str, Any]) -> list[str]:
    """Every account of the transaction by index: the message's keys, then those loaded from lookup tables."""
    message = _dict(_dict(tx.get("transaction")).get("message"))
    keys: list[str] = []
    parsed = False
    for key in _list(message.get("accountKeys")):
        if isinstance(key, dict):  # jsonParsed: lookup-table keys are in the list already
            parsed = True
            keys.append(str(key.get("pubkey")))
        else:
            keys.append(str(key))
    if not parsed:
        loaded = _dict(_dict(tx.get("meta")).get("loadedAddresses"))
        keys += [str(k) for k in _list(loaded.get("writable")) + _list(loaded.get("readonly"))]
    return keys


def fee_payer(tx: dict[str, Any]) -> str | None:
    keys = account_keys(tx)
    return keys[0] if keys else None


def sol_transfers(tx: dict[str, Any]) -> list[dict[str, Any]]:
    """Each account whose SOL balance changed, other than by the fee: ``{account, amount, ui_amount}``,
    ``amount`` in lamports (negative: it lost them), ``ui_amount`` in SOL as a decimal string."""
    meta = _dict(tx.get("meta"))
    pre, post = _ints(meta.get("preBalances")), _ints(meta.get("postBalances"))
    if pre is None or post is None or len(pre) != len(post):
        return []
    keys = account_keys(tx)
    fee = _int_or_none(meta.get("fee")) or 0
    out = []
    for index, (before, after) in enumerate(zip(pre, post, strict=True)):
        change = after - before + (fee if index == 0 else 0)  # the fee payer's fee is shown apart
        if change:
            account = keys[index] if index < len(keys) else f"#{index}"
            out.append(
                {"account": account, "amount": change, "ui_amount": ui_amount(change, LAMPORTS_PER_SOL_DECIMALS)}
            )
    return out


def token_transfers(tx: dict[str, Any]) -> list[dict[str, Any]]:
    """Each token account whose balance changed: ``{owner, token_account, mint, decimals, amount,
    ui_amount}``, ``amount`` the signed change in base units (decimal string), ``ui_amount`` scaled."""
    meta = _dict(tx.get("meta"))
    before = _token_balances(meta.get("preTokenBalances"))
    after = _token_balances(meta.get("postTokenBalances"))
    keys = account_keys(tx)
    out = []
    for index in sorted(before.keys() | after.keys()):
        old, new = before.get(index), after.get(index)
        info = new if new is not None else old
        assert info is not None
        change = (new["amount"] if new else 0) - (old["amount"] if old else 0)
        if not change:
            continue
        out.append(
            {
                "owner": info["owner"],
                "token_account": keys[index] if index < len(keys) else None,
                "mint": info["mint"],
                "decimals": info["decimals"],
                "amount": str(change),
                "ui_amount": ui_amount(change, info["decimals"]),
            }
        )
    return out


def _token_balances(value: Any) -> dict[int, dict[str, Any]]:
    """Token balances by account index; entries the node left incomplete are skipped."""
    out: dict[int, dict[str, Any]] = {}
    for balance in _list(value):
        if not isinstance(balance, dict):
            continue
        index = balance.get("accountIndex")
        ui = _dict(balance.get("uiTokenAmount"))
        amount, decimals = ui.get("amount"), ui.get("decimals")
        tokens = node_amount(amount)
        if not isinstance(index, int) or tokens is None or node_integer(decimals, 255) is None:
            continue
        owner = balance.get("owner")
        out[index] = {
            "owner": owner if isinstance(owner, str) else None,
            "mint": str(balance.get("mint")),
            "decimals": decimals,
            "amount": tokens,
        }
    return out


def program_interactions(tx: dict[str, Any]) -> list[dict[str, Any]]:
    """Each program invoked, in order of first use: ``{program_id, name, top_level, invocations,
    instructions}`` (``top_level``: the transaction called it directly, not only through a CPI)."""
    keys = account_keys(tx)
    message = _dict(_dict(tx.get("transaction")).get("message"))
    seen: dict[str, dict[str, Any]] = {}

    def note(ix: Any, top_level: bool) -> None:
        if not isinstance(ix, dict):
            return
        program = _program_id(ix, keys)
        if program is None:
            return
        found = seen.setdefault(
            program,
            {
                "program_id": program,
                "name": PROGRAM_NAMES.get(program),
                "top_level": False,
                "invocations": 0,
                "instructions": [],
            },
        )
        found["top_level"] = found["top_level"] or top_level
        found["invocations"] += 1
        name = instruction_name(program, ix)
        if name is not None and name not in found["instructions"]:
            found["instructions"].append(name)

    inner: dict[int, list[Any]] = {}
    for group in _list(_dict(tx.get("meta")).get("innerInstructions")):
        if isinstance(group, dict) and isinstance(group.get("index"), int):
            inner.setdefault(group["index"], []).extend(_list(group.get("instructions")))
    for position, ix in enumerate(_list(message.get("instructions"))):
        note(ix, True)
        for cpi in inner.get(position, []):
            note(cpi, False)
    return list(seen.values())


def _program_id(ix: dict[str, Any], keys: list[str]) -> str | None:
    program = ix.get("programId")
    if isinstance(program, str):
        return program
    index = ix.get("programIdIndex")
    if isinstance(index, int) and 0 <= index < len(keys):
        return keys[index]
    return None


def instruction_name(program: str, ix: dict[str, Any]) -> str | None:
    """The instruction's name: the node's parsed ``type``, or read from the data where it is simple."""
    parsed = ix.get("parsed")
    if isinstance(parsed, dict) and isinstance(parsed.get("type"), str):
        return str(parsed["type"])
    if isinstance(parsed, str):  # the Memo program's parsed form is its text
        return "memo"
    data = _data(ix.get("data"))
    if data is None:
        return None
    if program == str(COMPUTE_BUDGET_PROGRAM_ID) and data:
        return _COMPUTE_BUDGET.get(data[0])
    if program in _ANCHOR_PROGRAMS:
        return _ANCHOR.get(data[:8])
    return None


def _data(value: Any) -> bytes | None:
    if not isinstance(value, str):
        return None
    try:
        return base58.b58decode(value)
    except ValueError:
        return None


# -- words -----------------------------------------------------------------------------------------------


def summarize(tx: dict[str, Any], enriched: dict[str, Any]) -> str:
    """One line: what the transaction did, from the payer's point of view where there is one."""
    error = _dict(tx.get("meta")).get("err")
    programs = enriched["program_interactions"]
    if error is not None:
        return f"Failed {_called(programs)}: {describe_error(error)}"
    pump = _pump_action(programs)
    if pump is not None:
        return _pump_summary(tx, enriched, pump)
    tokens: list[dict[str, Any]] = enriched["token_transfers"]
    if tokens:
        return _token_summary(tokens)
    sol: list[dict[str, Any]] = enriched["sol_transfers"]
    if sol:
        return _sol_summary(sol)
    return f"Called {_called(programs)}; no balance changed but the fee"


def explain(tx: dict[str, Any], enriched: dict[str, Any]) -> str:
    """One or two plain-English sentences about the transaction."""
    meta = _dict(tx.get("meta"))
    payer = fee_payer(tx)
    fee = _int_or_none(meta.get("fee"))
    paid = (
        f"{short(payer)} paid the {fee:,}-lamport fee" if payer is not None and fee is not None else "the fee was paid"
    )
    slot = _in_slot(_int_or_none(tx.get("slot")))
    error = meta.get("err")
    if error is not None:
        return (
            f"This transaction{slot} failed ({describe_error(error)}), so none of its changes took effect. "
            f"Even so, {paid}."
        )
    what = enriched["summary"]
    return f"{what}{'' if what.endswith('.') else '.'} It succeeded{slot}, and {paid}."


def describe_error(error: Any) -> str:
    """A transaction error in words, e.g. ``instruction 1 failed: custom program error 1``."""
    if isinstance(error, dict) and isinstance(error.get("InstructionError"), list):
        detail = error["InstructionError"]
        if len(detail) == 2 and isinstance(detail[0], int):
            return f"instruction {detail[0] + 1} failed: {_error_words(detail[1])}"
    return _error_words(error)


def _error_words(error: Any) -> str:
    if isinstance(error, str):
        return _words(error)
    if isinstance(error, dict) and len(error) == 1:
        ((kind, value),) = error.items()
        if kind == "Custom":
            return f"custom program error {value}"
        return f"{_words(str(kind))} {value}"
    return str(error)


def _words(name: str) -> str:
    """``InsufficientFundsForRent`` → ``insufficient funds for rent``."""
    out = "".join(f" {c.lower()}" if c.isupper() else c for c in name).strip()
    return out or name


def _called(programs: list[dict[str, Any]]) -> str:
    top = [p for p in programs if p["top_level"] and p["program_id"] != str(COMPUTE_BUDGET_PROGRAM_ID)]
    names = list(dict.fromkeys(p["name"] or short(p["program_id"]) for p in top))
    if not names:
        return "transaction"
    return " + ".join(names) + " call"


def _pump_action(programs: list[dict[str, Any]]) -> str | None:
    for program in programs:
        if program["program_id"] == PUMP and program["top_level"]:
            for name in program["instructions"]:
                if name != "event":
                    return str(name)
    return None


def _pump_summary(tx: dict[str, Any], enriched: dict[str, Any], action: str) -> str:
    payer = fee_payer(tx)
    own = [t for t in enriched["token_transfers"] if t["owner"] == payer]
    sol = next((s["amount"] for s in enriched["sol_transfers"] if s["account"] == payer), 0)
    if action.startswith("buy") and own:
        token = own[0]
        return (
            f"pump.fun buy: {short(payer)} bought {token['ui_amount']} {mint_name(token['mint'])} "
            f"for {ui_amount(-sol, LAMPORTS_PER_SOL_DECIMALS)} SOL"
        )
    if action == "sell" and own:
        token = own[0]
        sold = token["ui_amount"].removeprefix("-")
        return (
            f"pump.fun sell: {short(payer)} sold {sold} {mint_name(token['mint'])} "
            f"for {ui_amount(sol, LAMPORTS_PER_SOL_DECIMALS)} SOL"
        )
    if action.startswith("create"):
        minted = next((t for t in enriched["token_transfers"] if int(t["amount"]) > 0), None)
        coin = f", mint {short(minted['mint'])}" if minted else ""
        return f"pump.fun create: {short(payer)} launched a new coin{coin}"
    return f"pump.fun {action} by {short(payer)}"


def _token_summary(tokens: list[dict[str, Any]]) -> str:
    by_mint: dict[str, list[dict[str, Any]]] = {}
    for token in tokens:
        by_mint.setdefault(token["mint"], []).append(token)
    parts = []
    for mint, moves in by_mint.items():
        out = [m for m in moves if m["amount"].startswith("-")]
        into = [m for m in moves if not m["amount"].startswith("-")]
        name = mint_name(mint)
        if out and into:
            parts.append(
                f"Token transfer: {into[0]['ui_amount']} {name} from {short(out[0]['owner'])} "
                f"to {short(into[0]['owner'])}"
            )
        elif into:
            parts.append(f"Minted {into[0]['ui_amount']} {name} to {short(into[0]['owner'])}")
        else:
            parts.append(f"Burned {out[0]['ui_amount'].removeprefix('-')} {name} of {short(out[0]['owner'])}")
    return "; ".join(parts)


def _sol_summary(sol: list[dict[str, Any]]) -> str:
    senders = [s for s in sol if s["amount"] < 0]
    receivers = [s for s in sol if s["amount"] > 0]
    if len(senders) == 1 and len(receivers) == 1:
        return (
            f"SOL transfer: {receivers[0]['ui_amount']} SOL from {short(senders[0]['account'])} "
            f"to {short(receivers[0]['account'])}"
        )
    moved = sum(s["amount"] for s in receivers)
    return (
        f"SOL moved: {ui_amount(moved, LAMPORTS_PER_SOL_DECIMALS)} SOL from {len(senders)} to {len(receivers)} accounts"
    )


def mint_name(mint: str) -> str:
    return MINT_NAMES.get(mint) or f"tokens of mint {short(mint)}"


def short(address: str | None) -> str:
    """``BX8z…DWGD``: enough of an address to recognise it in a sentence."""
    if address is None:
        return "an unknown account"
    return address if len(address) <= 10 else f"{address[:4]}…{address[-4:]}"


def ui_amount(raw: int, decimals: int) -> str:
    """``raw`` base units as a decimal string with ``decimals`` places, trailing zeros dropped: exact."""
    sign = "-" if raw < 0 else ""
    whole, frac = divmod(abs(raw), 10**decimals)
    digits = f"{frac:0{decimals}d}".rstrip("0") if decimals else ""
    return f"{sign}{whole}.{digits}" if digits else f"{sign}{whole}"


def _in_slot(slot: int | None) -> str:
    return f" in slot {slot}" if slot is not None else ""


def _int_or_none(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _ints(value: Any) -> list[int] | None:
    if not isinstance(value, list) or not all(_int_or_none(v) is not None for v in value):
        return None
    return value


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []

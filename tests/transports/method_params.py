"""Hypothesis strategies for every JSON-RPC method's params, built from its documented form (docs/api.md;
the node's methods as Solana's JSON-RPC documents them): each position and config field draws a valid
value or a hostile one of its kind (numbers past u64 and of 5,000 digits, digit strings of 5,000
characters, long strings, NUL, wrong types), and now and then a field no form has.

:data:`FORMS` has an entry per method of the registry (checked by the fuzz tests), so a method added
without its form fails them. A 5,000-digit JSON number cannot be built with ``json.dumps`` (Python's
4,300-digit limit): it is :data:`HUGE_NUMBER`, a placeholder that :func:`encode` writes as the raw
literal (and that the MCP client sends as a Python integer of 5,000 digits).
"""

from __future__ import annotations

import base64
import json
import random
from collections.abc import Callable, Collection, Mapping
from typing import Any

from hypothesis import strategies as st
from solders.hash import Hash
from solders.keypair import Keypair
from solders.message import Message
from solders.pubkey import Pubkey
from solders.system_program import TransferParams, transfer
from solders.transaction import Transaction

Strategy = st.SearchStrategy[Any]

HUGE_NUMBER = "\ue000huge\ue000"
HUGE_LITERAL = "1" + "0" * 4_999
FIVE_THOUSAND_DIGITS = "9" * 5_000
PUBKEYS = ["11111111111111111111111111111111", "So11111111111111111111111111111111111111112"]
PUBKEYS += ["TokenkegQfeZyiNwAJbNbGKPFXCWuBvf9Ss623VQ5DA", str(Pubkey.new_unique())]
SIGNATURE = "5VERv8NMvzbJMEkV8xnrLkEaWRtSz9CosKDYjCJjBRnbJLgp8uirBgmQpjKhoR4tjF3ZpRzrFmBV6UjKdiSZkQUW"
_PAYER = Keypair.from_seed(bytes(range(32)))
_TRANSFER = transfer(TransferParams(from_pubkey=_PAYER.pubkey(), to_pubkey=Pubkey.default(), lamports=1))
UNSIGNED_TX = bytes(Transaction.new_unsigned(Message([_TRANSFER], _PAYER.pubkey())))
SIGNED_TX = bytes(Transaction([_PAYER], Message([_TRANSFER], _PAYER.pubkey()), Hash.default()))
TX_TEXTS = [base64.b64encode(t).decode() for t in (UNSIGNED_TX, SIGNED_TX)] + ["AQID", "not base64 !"]


def mostly(main: Strategy, other: Strategy) -> Strategy:
    """``main`` three times in four, else ``other`` (``|`` draws each of its branches alike)."""
    return st.integers(0, 3).flatmap(lambda n: other if n == 0 else main)


#: Where int() and Decimal() break or slow down: digit strings past 4,300 characters (each length its own
#: value, so that hypothesis draws them again and again rather than once each), numbers past 64 bits.
huge: Strategy = mostly(
    st.builds(
        lambda sign, digits, tail: sign + "9" * digits + tail,
        st.sampled_from(["", "-", "0" * 5_000, " "]),
        st.integers(4_200, 6_000),
        st.sampled_from(["", ".5", "e5"]),
    ),
    st.integers(60_000, 70_000).map(lambda n: "x" * n)
    | st.sampled_from([2**64, 2**64 - 1, 2**63, -(2**63) - 1, 1e308, -1e308, str(2**64), str(2**63)]),
)
odd: Strategy = (
    st.sampled_from(["", "\x00", "é", "1e99999", "-1", "0x10", " 7", "1.5", "NaN", "all", "0", HUGE_NUMBER])
    | st.integers(-(2**64), 2**64 + 1)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.none()
    | st.booleans()
    | st.text(max_size=12)
    | st.just([])
    | st.just({})
)
hostile: Strategy = mostly(huge, odd)
not_array: Strategy = st.sampled_from([{}, {"x": 1}, "", FIVE_THOUSAND_DIGITS, 0, 2**64, True])


def kind(*valid: Strategy) -> Strategy:
    """A valid value of a kind (:func:`calls` makes one leaf of the params hostile)."""
    return st.one_of(*valid)


pubkey = kind(st.sampled_from(PUBKEYS))
signature = kind(st.just(SIGNATURE), st.just("1" * 64))
u64 = kind(st.integers(0, 2**64 - 1), st.integers(0, 1_000))
small = kind(st.integers(1, 100))
flag = kind(st.booleans())
tx = kind(st.sampled_from(TX_TEXTS))
commitment = kind(st.sampled_from(["processed", "confirmed", "finalized"]))
encoding = kind(st.sampled_from(["base58", "base64", "base64+zstd", "json", "jsonParsed"]))
bundle_id = kind(st.just("ab" * 32), st.just("zz" * 32))


def config(required: dict[str, Strategy] | None = None, **fields: Strategy) -> Strategy:
    """A config object: its ``required`` fields, any of the optional ``fields``, and now and then a field
    no form has."""
    unknown = st.dictionaries(st.sampled_from(["slippage", "x", FIVE_THOUSAND_DIGITS]), hostile, max_size=1)
    known = st.fixed_dictionaries(required or {}, optional=fields)
    return mostly(known, st.builds(lambda known, extra: {**known, **extra}, known, unknown))


def listed(item: Strategy, max_size: int = 6) -> Strategy:
    return st.lists(item, max_size=max_size)


def form(*positions: Strategy) -> Strategy:
    """params: the positions in order; now and then with trailing ones left out, or not an array."""
    prefixes = st.integers(0, len(positions)).flatmap(lambda n: st.tuples(*positions[:n]).map(list))
    return mostly(st.tuples(*positions).map(list), prefixes | st.just(None) | not_array)


cfg_commitment = config(commitment=commitment, minContextSlot=u64)
cfg_account = config(
    commitment=commitment, encoding=encoding, minContextSlot=u64, dataSlice=config(offset=u64, length=u64)
)
cfg_tx = config(encoding=encoding, commitment=commitment, maxSupportedTransactionVersion=kind(st.sampled_from([0, 1])))
cfg_block = config(
    encoding=encoding,
    commitment=commitment,
    maxSupportedTransactionVersion=kind(st.sampled_from([0, 1])),
    transactionDetails=kind(st.sampled_from(["full", "signatures", "none", "accounts"])),
    rewards=flag,
)
cfg_send = config(
    encoding=encoding, skipPreflight=flag, preflightCommitment=commitment, maxRetries=u64, minContextSlot=u64
)
urgency = kind(st.sampled_from(["low", "medium", "high", "critical"]))
level = kind(st.sampled_from(["Min", "Low", "Medium", "High", "VeryHigh", "UnsafeMax", "Default", "medium"]))
trade_common = {
    "slippage_bps": kind(st.integers(0, 10_000)),
    "priority_fee_micro_lamports": kind(st.integers(0, 10**8)),
}

NO_PARAMS = "getFirstAvailableBlock getHealth getHighestSnapshotSlot getIdentity getInflationRate getMaxRetransmitSlot"
NO_PARAMS += " getMaxShredInsertSlot getVersion minimumLedgerSlot getGenesisHash getEpochSchedule getClusterNodes"
NO_PARAMS += " getTipAccounts getTipFloor"
COMMITMENT_ONLY = "getBlockHeight getEpochInfo getInflationGovernor getLatestBlockhash getSlot getSlotLeader"
COMMITMENT_ONLY += " getStakeMinimumDelegation getTransactionCount"
#: Neither served nor sent to the node (denied, archive): any params, refused by name.
REFUSED = "getEnrichedTransaction explainTransaction getConfirmedTransaction getConfirmedSignaturesForAddress2"
REFUSED += " requestAirdrop getProgramAccounts getSupply getStakeActivation getTokenLargestAccounts"
REFUSED += " getTokenAccountsByDelegate getInflationReward"

FORMS: dict[str, Strategy] = {
    **{name: form() for name in NO_PARAMS.split()},
    **{name: form(cfg_commitment) for name in COMMITMENT_ONLY.split()},
    **{name: form(pubkey, listed(u64), cfg_account) for name in REFUSED.split()},
    "getAccountInfo": form(pubkey, cfg_account),
    "getBalance": form(pubkey, cfg_commitment),
    "getBlockCommitment": form(u64),
    "getBlockProduction": form(
        config(commitment=commitment, identity=pubkey, range=config(firstSlot=u64, lastSlot=u64))
    ),
    "getFeeForMessage": form(tx, cfg_commitment),
    "getLeaderSchedule": form(u64, config(commitment=commitment, identity=pubkey)),
    "getMinimumBalanceForRentExemption": form(u64, cfg_commitment),
    "getMultipleAccounts": form(listed(pubkey), cfg_account),
    "getRecentPerformanceSamples": form(small),
    "getRecentPrioritizationFees": form(listed(pubkey)),
    "getSlotLeaders": form(u64, small),
    "getTokenAccountBalance": form(pubkey, cfg_commitment),
    "getTokenSupply": form(pubkey, cfg_commitment),
    "getVoteAccounts": form(
        config(commitment=commitment, votePubkey=pubkey, keepUnstakedDelinquents=flag, delinquentSlotDistance=u64)
    ),
    "isBlockhashValid": form(kind(st.just(str(Hash.default()))), cfg_commitment),
    "getBlockTime": form(u64),
    "getSignatureStatuses": form(listed(signature), config(searchTransactionHistory=flag)),
    "getSignaturesForAddress": form(
        pubkey, config(limit=small, before=signature, until=signature, commitment=commitment, minContextSlot=u64)
    ),
    "simulateTransaction": form(
        tx,
        config(
            sigVerify=flag,
            replaceRecentBlockhash=flag,
            commitment=commitment,
            encoding=encoding,
            accounts=config(addresses=listed(pubkey), encoding=encoding),
            innerInstructions=flag,
        ),
    ),
    "getTransaction": form(signature, cfg_tx),
    "getBlocks": form(u64, u64, cfg_commitment),
    "getBlock": form(u64, cfg_block),
    "getBlocksWithLimit": form(u64, small, cfg_commitment),
    "getTokenAccountsByOwner": form(pubkey, config(mint=pubkey, programId=pubkey), cfg_account),
    "getAssetsByOwner": form(kind(pubkey, config(ownerAddress=pubkey, owner=pubkey, page=small, limit=small))),
    "sendTransaction": form(tx, cfg_send),
    "sendSmartTransaction": form(tx, config(simulate=flag, priority_fee_urgency=urgency)),
    # skipPreflight false: a signed transaction is simulated and refused, never raced for 30 slots
    "sendAndConfirm": form(tx, config(encoding=encoding, skipPreflight=kind(st.just(False)))),
    "getSendStatus": form(signature),
    "sendBundle": form(listed(tx), config(encoding=encoding)),
    "simulateBundle": form(config(transactions=listed(tx))),
    "getBundleStatuses": form(listed(bundle_id)),
    "getInflightBundleStatuses": form(listed(bundle_id)),
    "suggestPriorityFee": form(kind(urgency, config(urgency=urgency, accounts=listed(pubkey)))),
    "getPriorityFeeEstimate": form(
        config(
            accountKeys=listed(pubkey),
            transaction=tx,
            options=config(
                priorityLevel=level,
                includeAllPriorityFeeLevels=flag,
                transactionEncoding=kind(st.sampled_from(["base58", "base64"])),
                recommended=flag,
                lookbackSlots=u64,
            ),
        )
    ),
    "getTransactionHistory": form(pubkey, config(limit=small)),
    "executeSnipe": form(
        config(
            {"mint": pubkey, "amount_sol": kind(st.sampled_from([0.01, "0.5", 1, "0.000000001"]))},
            exact_in=flag,
            **trade_common,
        )
    ),
    "executeSell": form(
        config({"mint": pubkey, "token_amount": kind(st.sampled_from([1, "1000000"]))}, **trade_common)
    ),
}


#: What /ws serves beyond the JSON-RPC methods (docs/api.md, WebSocket; Solana's PubSub forms).
WS_FORMS = {
    "accountSubscribe": form(pubkey, config(commitment=commitment, encoding=encoding)),
    "logsSubscribe": form(st.just("all") | config(mentions=listed(pubkey, 2)), cfg_commitment),
    "signatureSubscribe": form(signature, config(commitment=commitment, enableReceivedNotification=flag)),
    "programSubscribe": form(pubkey, config(commitment=commitment, encoding=encoding, filters=st.just([]))),
    "rootSubscribe": form(),
    "accountUnsubscribe": form(u64),
    "subscribeSignal": form(config(kinds=listed(st.sampled_from(["newPair", "largeSwap"]), 2), mint=pubkey)),
    "signalUnsubscribe": form(st.just("sig_sub_1")),
}


def calls(forms: Mapping[str, Strategy], often: Collection[str] = ()) -> Strategy:
    """``(method, params)`` of the methods of ``forms``, three in four from ``often`` (the methods whose
    params the gateway itself parses) when given; params from the method's form (None: left out), and
    two times in three with one value in them (at any depth) made hostile, the others left valid so
    that the parser reaches it."""
    names = st.sampled_from(sorted(forms))
    if often:
        names = mostly(st.sampled_from(sorted(often)), names)
    return names.flatmap(lambda m: mutated(forms[m]).map(lambda params: (m, params)))


def mutated(valid: Strategy) -> Strategy:
    """What ``valid`` draws, two times in three with one of its scalars (at any depth) made hostile."""
    return st.builds(_mutated, valid, st.randoms(use_true_random=False), hostile, st.integers(0, 2))


def _mutated(params: Any, chooser: random.Random, value: Any, how: int) -> Any:
    places = _places(params)
    if how == 0 or not places:
        return params
    return _replaced(params, chooser.choice(places), value)


def _places(value: Any) -> list[tuple[Any, ...]]:
    """The paths (list indexes, object keys) of every scalar inside ``value``."""
    places: list[tuple[Any, ...]] = []
    stack: list[tuple[tuple[Any, ...], Any]] = [((), value)]
    while stack:
        path, node = stack.pop()
        if isinstance(node, dict | list):
            children = node.items() if isinstance(node, dict) else enumerate(node)
            stack.extend(((*path, key), child) for key, child in children)
        elif path:
            places.append(path)
    return places


def _replaced(value: Any, path: tuple[Any, ...], new: Any) -> Any:
    if not path:
        return new
    head, rest = path[0], path[1:]
    if isinstance(value, list):
        return [_replaced(v, rest, new) if i == head else v for i, v in enumerate(value)]
    return {k: _replaced(v, rest, new) if k == head else v for k, v in value.items()}


def request(item_id: int, method: str, params: Any) -> dict[str, Any]:
    document: dict[str, Any] = {"jsonrpc": "2.0", "id": item_id, "method": method}
    if params is not None:
        document["params"] = params
    return document


def encode(document: Any) -> bytes:
    """JSON text of ``document``, :data:`HUGE_NUMBER` written as a raw 5,000-digit number."""
    return json.dumps(document).replace(json.dumps(HUGE_NUMBER), HUGE_LITERAL).encode()


def with_huge_ints(value: Any) -> Any:
    """``value`` with :data:`HUGE_NUMBER` as a Python integer of 5,000 digits (what an MCP client sends)."""
    return _walk(value, lambda leaf: 2**64 + 1 if leaf == HUGE_NUMBER else leaf)


def _walk(value: Any, leaf: Callable[[Any], Any]) -> Any:
    if isinstance(value, list):
        return [_walk(v, leaf) for v in value]
    if isinstance(value, dict):
        return {k: _walk(v, leaf) for k, v in value.items()}
    return leaf(value)

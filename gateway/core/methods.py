"""Method classes and what each costs: the one pricing table of the gateway.

Pure data and lookups, no I/O. Prices are positive integer credits. A class without a price in the
table (denied, disabled, or outcome-priced and not built yet) is refused before admission: planning
asks :meth:`PriceTable.price` and refuses what has none, so nothing unpriced is ever forwarded free.
"""

from __future__ import annotations

import difflib
import functools
from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum


class MethodClass(StrEnum):
    READ_CHEAP = "READ_CHEAP"
    READ_MEDIUM = "READ_MEDIUM"
    READ_HEAVY = "READ_HEAVY"
    SEND = "SEND"
    SEND_AND_CONFIRM = "SEND_AND_CONFIRM"
    SEND_BUNDLE = "SEND_BUNDLE"
    BUNDLE_STATUS = "BUNDLE_STATUS"
    TRADE_BUILD = "TRADE_BUILD"
    ARCHIVE_HISTORY = "ARCHIVE_HISTORY"
    DENIED = "DENIED"


READ_CHEAP_METHODS = frozenset(
    """getAccountInfo getBalance getBlockCommitment getBlockHeight getBlockProduction getBlockTime getEpochInfo
    getEpochSchedule getFeeForMessage getFirstAvailableBlock getGenesisHash getHealth getHighestSnapshotSlot
    getIdentity getInflationGovernor getInflationRate getLatestBlockhash getLeaderSchedule getMaxRetransmitSlot
    getMaxShredInsertSlot getMinimumBalanceForRentExemption getMultipleAccounts getRecentPerformanceSamples
    getRecentPrioritizationFees getSignatureStatuses getSlot getSlotLeader getSlotLeaders getStakeMinimumDelegation
    getTokenAccountBalance getTokenSupply getTransactionCount getVersion getVoteAccounts isBlockhashValid
    minimumLedgerSlot getPriorityFeeEstimate getSendStatus getTipAccounts getTipFloor""".split()
)
READ_MEDIUM_METHODS = frozenset(
    "simulateTransaction getTransaction getSignaturesForAddress suggestPriorityFee getClusterNodes".split()
)
READ_HEAVY_METHODS = frozenset(
    """simulateBundle getBlock getBlocks getBlocksWithLimit getTokenAccountsByOwner getAssetsByOwner
    getTransactionHistory""".split()
)
SEND_METHODS = frozenset({"sendTransaction", "sendSmartTransaction"})
ARCHIVE_METHODS = frozenset(
    {"getEnrichedTransaction", "explainTransaction", "getConfirmedTransaction", "getConfirmedSignaturesForAddress2"}
)
# getTokenAccountsByDelegate and getInflationReward are refused like the denied class (spec rule 2).
DENIED_METHODS = frozenset(
    {
        "requestAirdrop",
        "getProgramAccounts",
        "getSupply",
        "getStakeActivation",
        "getTokenLargestAccounts",
        "getTokenAccountsByDelegate",
        "getInflationReward",
    }
)

DEFAULT_CLASS_CREDITS: Mapping[MethodClass, int] = {
    MethodClass.READ_CHEAP: 1,
    MethodClass.READ_MEDIUM: 5,
    MethodClass.READ_HEAVY: 25,
    MethodClass.SEND: 2,
    MethodClass.SEND_AND_CONFIRM: 10,  # the landing price; a failed send pays SEND's price (the base fee)
    MethodClass.SEND_BUNDLE: 10,
    MethodClass.BUNDLE_STATUS: 2,
    MethodClass.TRADE_BUILD: 50,  # the build fee; each build adds a share of its notional (core/trade_fees.py)
}
#: Classes billed by a durable hold at the store, settled when the outcome is known (not from a lease).
HELD_CLASSES = frozenset({MethodClass.SEND_AND_CONFIRM})
#: Classes whose handler prices each call from what it reads (the table's price is the fixed part), then
#: admits that price from the lease and completes it itself (``Meter.admit`` / ``Meter.complete``).
PRODUCT_PRICED_CLASSES = frozenset({MethodClass.TRADE_BUILD})
#: Classes the metering stage takes only a rate unit for: their handlers bill them.
SELF_BILLED_CLASSES = HELD_CLASSES | PRODUCT_PRICED_CLASSES

#: Per-class upstream timeouts in seconds (spec, Limits).
CLASS_TIMEOUT_S: Mapping[MethodClass, float] = {
    MethodClass.READ_CHEAP: 5.0,
    MethodClass.READ_MEDIUM: 15.0,
    MethodClass.READ_HEAVY: 30.0,
    MethodClass.ARCHIVE_HISTORY: 30.0,
    MethodClass.SEND: 10.0,
    MethodClass.SEND_AND_CONFIRM: 15.0,
    MethodClass.SEND_BUNDLE: 10.0,
    MethodClass.BUNDLE_STATUS: 10.0,
    MethodClass.TRADE_BUILD: 10.0,  # each of a build's node reads
}


def _build_index() -> dict[str, MethodClass]:
    index: dict[str, MethodClass] = {}
    for methods, cls in (
        (READ_CHEAP_METHODS, MethodClass.READ_CHEAP),
        (READ_MEDIUM_METHODS, MethodClass.READ_MEDIUM),
        (READ_HEAVY_METHODS, MethodClass.READ_HEAVY),
        (SEND_METHODS, MethodClass.SEND),
        (frozenset({"sendAndConfirm"}), MethodClass.SEND_AND_CONFIRM),
        (frozenset({"sendBundle"}), MethodClass.SEND_BUNDLE),
        (frozenset({"getBundleStatuses", "getInflightBundleStatuses"}), MethodClass.BUNDLE_STATUS),
        (frozenset({"executeSnipe", "executeSell"}), MethodClass.TRADE_BUILD),
        (ARCHIVE_METHODS, MethodClass.ARCHIVE_HISTORY),
        (DENIED_METHODS, MethodClass.DENIED),
    ):
        for name in methods:
            index[name] = cls
    return index


_CLASS_OF: Mapping[str, MethodClass] = _build_index()


def method_class(method: str) -> MethodClass | None:
    """The class of a JSON-RPC method, or ``None`` for a method the gateway does not know."""
    return _CLASS_OF.get(method)


#: Methods worth suggesting for a misspelt name, by lower-case name: the denied ones never answer.
_SUGGESTABLE: Mapping[str, str] = {name.lower(): name for name, c in _CLASS_OF.items() if c is not MethodClass.DENIED}


@functools.lru_cache(maxsize=1024)
def closest_methods(method: str, limit: int = 3) -> tuple[str, ...]:
    """The known methods nearest to an unknown name (case aside), best first; at most ``limit``. Up to
    about 0.1 ms a name (a refusal is free: the cache spares the repeated misspellings of a client)."""
    if len(method) > 64:  # no method name is that long; and difflib's cost grows with the length
        return ()
    close = difflib.get_close_matches(method.lower(), _SUGGESTABLE.keys(), n=limit, cutoff=0.75)
    return tuple(_SUGGESTABLE[name] for name in close)


@dataclass(frozen=True)
class PriceTable:
    """Credits per method class; configurable, positive integers only (checked when built)."""

    class_credits: Mapping[MethodClass, int]

    def __post_init__(self) -> None:
        for cls, credits in self.class_credits.items():
            if isinstance(credits, bool) or not isinstance(credits, int) or credits <= 0:
                raise ValueError(f"price of {cls}: {credits!r} is not a positive integer number of credits")

    @classmethod
    def default(cls) -> PriceTable:
        return cls(dict(DEFAULT_CLASS_CREDITS))

    def with_overrides(self, overrides: Mapping[str, int]) -> PriceTable:
        merged = dict(self.class_credits)
        for name, credits in overrides.items():
            merged[MethodClass(name)] = credits
        return PriceTable(merged)

    def price(self, cls: MethodClass) -> int | None:
        """The class's price, or None: the class is not sold here and its calls must be refused."""
        return self.class_credits.get(cls)

    def document(self, not_available: frozenset[str] = frozenset()) -> dict[str, object]:
        """The class part of the ``GET /pricing`` document: each class's price (null: not sold, its
        calls are refused) and members, and which members are not available on this gateway yet."""
        classes: dict[str, object] = {}
        for cls in MethodClass:
            members = sorted(name for name, c in _CLASS_OF.items() if c is cls)
            classes[cls.value] = {
                "credits": self.class_credits.get(cls),
                "methods": members,
                "not_available": [m for m in members if m in not_available],
            }
        return classes

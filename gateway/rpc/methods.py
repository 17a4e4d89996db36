"""The methods the node answers as they are, and the ones refused by class, with their parameter rules.

Pure. Declared once here (:class:`gateway.core.methods.MethodSpec`); the methods the features answer,
or whose params they parse, are declared in their packages (``<feature>/methods.py``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from gateway.core.errors import RpcError, invalid_params
from gateway.core.methods import MethodClass, MethodSpec, Parser, node_methods
from gateway.core.params import is_pubkey

ASSET_OWNER_KEYS = ("ownerAddress", "owner_address", "owner")

# The config fields of the reads whose answers the response cache keeps (docs/api.md, Response cache):
# any other field is refused, free, so neither the cache key nor the node's request carries what the
# method does not read. solana-py and @solana/kit send only these.
TX_CONFIG = frozenset({"encoding", "commitment", "maxSupportedTransactionVersion"})
BLOCK_CONFIG = TX_CONFIG | {"transactionDetails", "rewards"}
STATUSES_CONFIG = frozenset({"searchTransactionHistory"})
#: A config string (an encoding, a commitment, a detail level) longer than this is no name the node knows.
MAX_CONFIG_WORD = 32
_SHOWN = 40  # how much of a refused field name an error message repeats


def known_config(at: int, fields: frozenset[str], then: Parser[None] | None = None) -> Parser[None]:
    """The rule of a method whose params are ``at`` positional values and an optional config object
    (or a legacy encoding string) at ``params[at]`` with only ``fields``, each a short scalar; ``then``
    runs after."""
    expected = ", ".join(f"`{f}`" for f in sorted(fields))

    def check(params: list[Any]) -> RpcError | None:
        if len(params) > at + 1:
            return invalid_params(f"expected at most {at + 1} parameters, got {len(params)}")
        config = params[at] if len(params) > at else None
        if isinstance(config, str) and len(config) > MAX_CONFIG_WORD:
            return invalid_params(f"unknown encoding `{config[:_SHOWN]}`")
        if isinstance(config, dict):
            for name, value in config.items():
                if name not in fields:
                    return invalid_params(f"unknown field `{name[:_SHOWN]}`, expected one of {expected}")
                if isinstance(value, (dict, list)) or (isinstance(value, str) and len(value) > MAX_CONFIG_WORD):
                    return invalid_params(f"`{name}` must be a name, a number or a boolean")
        return then(params) if then is not None else None

    return check


def no_more_than(count: int) -> Parser[None]:
    """The rule of a method that reads at most ``count`` positional params and no config."""

    def check(params: list[Any]) -> RpcError | None:
        if len(params) > count:
            return invalid_params("no parameters were expected" if not count else f"expected at most {count}")
        return None

    return check


def _token_accounts_by_owner(params: list[Any]) -> RpcError | None:
    if len(params) < 2 or not is_pubkey(params[0]) or not isinstance(params[1], dict):
        return invalid_params("expected [owner pubkey, {mint | programId}, config?]")
    if len(params) == 2:
        params.append({"encoding": "base64"})
    elif not isinstance(params[2], dict):
        return invalid_params("config must be an object")
    else:
        params[2].setdefault("encoding", "base64")
    return None


def _assets_by_owner(params: list[Any]) -> RpcError | None:
    if not params:
        return invalid_params("owner is required")
    first = params[0]
    owner: Any = first
    rest: dict[str, Any] = {}
    if isinstance(first, dict):
        key = next((k for k in ASSET_OWNER_KEYS if k in first), None)
        if key is None:
            return invalid_params("owner object needs ownerAddress, owner_address or owner")
        owner = first[key]
        rest = {k: v for k, v in first.items() if k not in ASSET_OWNER_KEYS}
    if not is_pubkey(owner):
        return invalid_params("owner must be a base58 public key")
    params[:] = [{"ownerAddress": owner, **rest}]
    return None


def tx_version(config_at: int, *, forwarded: bool) -> Callable[[list[Any]], RpcError | None]:
    """The rule of a method that accepts ``maxSupportedTransactionVersion`` (0 or 1, default 0) in its
    config at ``params[config_at]``: ``forwarded``, the node reads it and the default 0 is injected;
    otherwise it is validated and dropped."""

    def check(params: list[Any]) -> RpcError | None:
        config = params[config_at] if len(params) > config_at else None
        if config is not None and not isinstance(config, dict):
            return None  # legacy string forms (e.g. an encoding) are the node's to judge
        version = config.get("maxSupportedTransactionVersion") if config else None
        if version is not None and (isinstance(version, bool) or version not in (0, 1)):
            return invalid_params("maxSupportedTransactionVersion must be 0 or 1")
        if forwarded:
            if config is not None:
                config.setdefault("maxSupportedTransactionVersion", 0)
            elif len(params) == config_at:  # a missing positional argument is the node's to report
                params.append({"maxSupportedTransactionVersion": 0})
        elif config is not None:
            config.pop("maxSupportedTransactionVersion", None)  # validated; the node does not read it here
        return None

    return check


SPECS: tuple[MethodSpec[Any], ...] = (
    *node_methods(
        MethodClass.READ_CHEAP,
        """getAccountInfo getBalance getBlockCommitment getBlockHeight getBlockProduction getEpochInfo
        getFeeForMessage getFirstAvailableBlock getHealth getHighestSnapshotSlot
        getIdentity getInflationGovernor getInflationRate getLatestBlockhash getLeaderSchedule getMaxRetransmitSlot
        getMaxShredInsertSlot getMinimumBalanceForRentExemption getMultipleAccounts getRecentPerformanceSamples
        getRecentPrioritizationFees getSlot getSlotLeader getSlotLeaders
        getStakeMinimumDelegation getTokenAccountBalance getTokenSupply getTransactionCount getVersion
        getVoteAccounts isBlockhashValid minimumLedgerSlot""",
    ),
    # the cached reads (gateway/rpc/cache_rules.py): their params are bounded to what they read
    MethodSpec("getBlockTime", MethodClass.READ_CHEAP, no_more_than(1)),
    MethodSpec("getGenesisHash", MethodClass.READ_CHEAP, no_more_than(0)),
    MethodSpec("getEpochSchedule", MethodClass.READ_CHEAP, no_more_than(0)),
    MethodSpec("getSignatureStatuses", MethodClass.READ_CHEAP, known_config(1, STATUSES_CONFIG)),
    *node_methods(MethodClass.READ_MEDIUM, "getSignaturesForAddress getClusterNodes"),
    MethodSpec("simulateTransaction", MethodClass.READ_MEDIUM, tx_version(1, forwarded=False)),
    MethodSpec("getTransaction", MethodClass.READ_MEDIUM, known_config(1, TX_CONFIG, tx_version(1, forwarded=True))),
    *node_methods(MethodClass.READ_HEAVY, "getBlocks"),
    MethodSpec("getBlock", MethodClass.READ_HEAVY, known_config(1, BLOCK_CONFIG, tx_version(1, forwarded=True))),
    MethodSpec("getBlocksWithLimit", MethodClass.READ_HEAVY, tx_version(2, forwarded=False)),
    MethodSpec("getTokenAccountsByOwner", MethodClass.READ_HEAVY, _token_accounts_by_owner),
    MethodSpec("getAssetsByOwner", MethodClass.READ_HEAVY, _assets_by_owner),
    *node_methods(
        MethodClass.ARCHIVE_HISTORY,
        "getEnrichedTransaction explainTransaction getConfirmedTransaction getConfirmedSignaturesForAddress2",
    ),
    # getTokenAccountsByDelegate and getInflationReward are refused like the denied class (docs/api.md, DENIED).
    *node_methods(
        MethodClass.DENIED,
        """requestAirdrop getProgramAccounts getSupply getStakeActivation getTokenLargestAccounts
        getTokenAccountsByDelegate getInflationReward""",
    ),
)

"""The filter budget of one gRPC server process: what its one upstream subscription may ask the node for.

The process asks for the union of its streams' filters, each distinct filter once
(:func:`geyser_proto.fanout.union_request`); the node refuses a request with more filters of a kind than
it accepts (``StreamLimits.max_filters``, the setting ``upstream_grpc_max_filters``). So every request a
stream makes is claimed here first: it is refused, and only that stream, when the union would then hold
more than ``max_filters`` distinct filters of a kind, or when the distinct filters of its account's
streams together would be more than ``account_filters`` (a part of the budget, so one account cannot
take it all and refuse everyone else's streams). A stream's new request is claimed instead of its old
one, so a bigger replacement is checked like a new stream.

With the replay log the process asks the node for its whole feed instead (``whole_feed``): the node never
sees the streams' filters, so the process's limit then counts only the filters the fan-out tries on every
update (those without keys: :func:`keyless`); keyed ones are index lookups and count only in their
account's share, so a few accounts can no longer take the whole budget with them.

Kinds that count: ``accounts``, and ``transactions`` with ``transactions_status`` (the union asks for
both as transaction filters); the union's ``slots`` and ``blocks_meta`` are one filter each however many
streams ask. Pure: no I/O.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Hashable

from gateway.grpc.rules import StreamLimits, account_budget_message, process_budget_message
from geyser_proto.filters import AccountFilter, Filters, TransactionFilter

#: The kinds the budget counts, as a client's message names them.
KINDS = ("`accounts`", "`transactions` and `transactions_status`")
_Parts = tuple[frozenset[Hashable], ...]
_NONE: _Parts = tuple(frozenset() for _ in KINDS)


def parts(filters: Filters) -> _Parts:
    """The distinct filters of each counted kind that ``filters`` adds to the union."""
    transactions = frozenset(tf for _, tf in (*filters.transactions, *filters.transactions_status))
    return frozenset(af for _, af in filters.accounts), transactions


def _distinct_after(held: Counter[Hashable], old: frozenset[Hashable], new: frozenset[Hashable]) -> int:
    """How many distinct filters ``held`` (filter -> streams using it) has once ``old`` is swapped for ``new``."""
    gone = sum(1 for f in old - new if held[f] == 1)
    added = sum(1 for f in new - old if held[f] == 0)
    return len(held) - gone + added


def keyless(f: Hashable) -> bool:
    """A filter the fan-out tries on every update of its kind (no account, owner or transaction key to index it
    under, :mod:`geyser_proto.fanout`); a keyed one costs only the updates that carry one of its keys."""
    if isinstance(f, AccountFilter):
        return not (f.accounts or f.owners)
    if isinstance(f, TransactionFilter):
        return not (f.include or f.required)
    return True


class FilterBudget:
    """``whole_feed``: the upstream subscription asks for the node's whole feed (the replay log), so the
    streams' filters never reach the node and the process's limit counts only the keyless filters, the ones
    that cost matching on every update; each account's share still counts all of its filters."""

    def __init__(self, limits: StreamLimits, *, whole_feed: bool = False) -> None:
        self.limits = limits
        self.whole_feed = whole_feed
        self._streams: dict[Hashable, tuple[str, _Parts]] = {}  # stream -> (account, its parts)
        self._process: list[Counter[Hashable]] = [Counter() for _ in KINDS]
        self._accounts: dict[str, list[Counter[Hashable]]] = {}

    def claim(self, stream: Hashable, account: str, filters: Filters) -> str | None:
        """Let ``stream`` (of ``account``) have ``filters`` instead of what it had; None, or why not
        (nothing changes then)."""
        new = parts(filters)
        old = self._streams.get(stream, (account, _NONE))[1]
        mine = self._accounts.get(account) or [Counter() for _ in KINDS]
        for i, kind in enumerate(KINDS):
            count = _distinct_after(mine[i], old[i], new[i])
            if count > self.limits.account_filters:
                return account_budget_message(kind, count, self.limits)
            count = _distinct_after(self._process[i], self._counted(old[i]), self._counted(new[i]))
            if count > self.limits.max_filters:
                return process_budget_message(kind, count, self.limits, self.whole_feed)
        self.release(stream)
        self._streams[stream] = (account, new)
        mine = self._accounts.setdefault(account, [Counter() for _ in KINDS])
        for i in range(len(KINDS)):
            self._process[i].update(self._counted(new[i]))
            mine[i].update(new[i])
        return None

    def release(self, stream: Hashable) -> None:
        """The stream ended: its filters no longer count."""
        held = self._streams.pop(stream, None)
        if held is None:
            return
        account, old = held
        mine = self._accounts.get(account) or [Counter() for _ in KINDS]  # none when its filters counted nothing
        for i in range(len(KINDS)):
            for counter, gone in ((self._process[i], self._counted(old[i])), (mine[i], old[i])):
                counter.subtract(gone)
                for f in gone:
                    if counter[f] <= 0:
                        del counter[f]
        if not any(mine):
            self._accounts.pop(account, None)

    def _counted(self, held: frozenset[Hashable]) -> frozenset[Hashable]:
        """What of ``held`` the process's limit counts."""
        return frozenset(f for f in held if keyless(f)) if self.whole_feed else held

    def used(self, account: str | None = None) -> tuple[int, ...]:
        """Distinct filters of each kind in use: the process's, or one account's streams'."""
        counters = self._process if account is None else self._accounts.get(account)
        return tuple(len(c) for c in counters) if counters else tuple(0 for _ in KINDS)

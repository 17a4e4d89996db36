"""getTransactionHistory, as the one list (``gateway/app/features.py``) takes it."""

from __future__ import annotations

from collections.abc import Mapping

from gateway.core.upstreams import Role
from gateway.history.method import TransactionHistory
from gateway.history.methods import SPECS
from gateway.pipeline.declaration import Feature, Host, LocalMethod


def _handlers(host: Host) -> Mapping[str, LocalMethod]:
    return {"getTransactionHistory": TransactionHistory(host.upstream_for(Role.HEAVY))}  # an indexer's methods


FEATURE: Feature[Host] = Feature("history", methods=SPECS, handlers=_handlers)

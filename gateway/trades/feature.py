"""executeSnipe and executeSell, as the one list (``gateway/app/features.py``) takes them: each builder
charges its fee through the replica's meter, at the replica's SOL/USD rate."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Protocol

from gateway.credits.meter import Meter
from gateway.pipeline.declaration import Feature, Host, LocalMethod
from gateway.trades.builders import ExecuteSell, ExecuteSnipe
from gateway.trades.fees import TradeFees
from gateway.trades.methods import SPECS
from gateway.trades.settings import TradeSettings
from gateway.trades.sol_usd import RateSource


class TradesHost(Host, Protocol):
    """What the builders read from the replica (which also prices them in ``GET /pricing``)."""

    @property
    def meter(self) -> Meter: ...

    @property
    def trade_fees(self) -> TradeFees: ...

    @property
    def sol_usd(self) -> RateSource: ...


def _handlers(host: TradesHost) -> Mapping[str, LocalMethod]:
    return {
        "executeSnipe": ExecuteSnipe(host.upstream, host.meter, host.trade_fees, host.sol_usd, host.top_up),
        "executeSell": ExecuteSell(host.upstream, host.meter, host.trade_fees, host.sol_usd, host.top_up),
    }


FEATURE: Feature[TradesHost] = Feature("trades", methods=SPECS, handlers=_handlers, settings=TradeSettings)

"""``executeSnipe`` and ``executeSell``: their declarations (the parsers are :mod:`gateway.trades.params`). Pure."""

from __future__ import annotations

from typing import Any

from gateway.core.methods import MethodClass, MethodSpec
from gateway.trades.params import parse_sell, parse_snipe

SPECS: tuple[MethodSpec[Any], ...] = (
    MethodSpec("executeSnipe", MethodClass.TRADE_BUILD, parse_snipe, local=True),
    MethodSpec("executeSell", MethodClass.TRADE_BUILD, parse_sell, local=True),
)

"""Unsigned pump.fun buy/sell builders: parameters, curve rules, the trade fee, SOL/USD."""

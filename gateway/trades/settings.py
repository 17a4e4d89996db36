"""The trade builders' settings: the notional fee, and the SOL/USD rate it is converted at."""

from __future__ import annotations

from pydantic import Field

from gateway.base.config import DEVNODE_SOL_USD_POOL, ServiceSettings


class TradeSettings(ServiceSettings):
    """What a built trade is billed."""

    trade_notional_fee_bps: int = Field(
        10,
        ge=0,
        le=1_000,
        description="executeSnipe / executeSell: the share of the trade's SOL notional billed on top of the build "
        "fee (the TRADE_BUILD class price, pricing.TRADE_BUILD, default 50 credits), in basis points (10 = 0.10%).",
    )
    trade_sol_usd_micro: int = Field(
        150_000_000,
        ge=1,
        le=1_000_000_000_000,
        description="The SOL/USD rate the trade builders convert their notional share to credits at when the "
        "SOL/USD pool (trade_sol_usd_pool) cannot be read, in micro-USD per SOL (150000000 = $150.00; /pricing: "
        "rate_source configured).",
    )
    trade_sol_usd_pool: str | None = Field(
        DEVNODE_SOL_USD_POOL,
        description="A PumpSwap pool of wrapped SOL against usdc_mint whose reserves give the live SOL/USD rate "
        "(/pricing: rate_source pool:<address>), read at most every trade_sol_usd_ttl_s. Default: the pool the "
        "embedded devnode hosts; on another chain, a real pool's address, or empty for the configured rate only.",
    )
    trade_sol_usd_ttl_s: float = Field(
        10.0, gt=0, le=3_600, description="How long a SOL/USD rate read from the pool is used before it is read again."
    )

"""The bodies of ``/signals/recent`` as pydantic models: the OpenAPI document's schemas (docs/api.md, Signals)."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field

from gateway.core.patterns import SIGNAL_ID


class SignalEvent(BaseModel):
    """A signal, as ``/signals/recent`` lists it and ``signalNotification`` delivers it (without ``id``)."""

    id: str = Field(pattern=SIGNAL_ID, description="its id in the signal log, <slot>-<n>; orders by slot")
    kind: Literal["newPair", "graduation", "largeSwap", "walletActivity"]
    program: str = Field(description="the program that emitted the event")
    signature: str
    slot: int
    mint: str | None
    accounts: list[str] = Field(description="the accounts the event names: mint, bonding curve or pool, user")
    quote_asset: str | None = Field(description="SOL for classic curves, else a quote-mint address")
    curve_type: Literal["classic", "v2"] | None
    complete: bool | None = Field(description="newPair: false (created at this slot); graduation: true")
    block_time: int | None = Field(description="unix seconds (chosen here)")
    sol_amount: int | None = Field(description="lamports: a trade's or a migration's size (chosen here)")
    side: Literal["buy", "sell"] | None = Field(description="a trade's side (chosen here)")


class RecentSignals(BaseModel):
    events: list[SignalEvent] = Field(description="newest first")
    more: bool = Field(description="older events matched but were left out: page with before=<last id>")
    next_since_slot: int | None = Field(description="pass as since_slot to get only what came after this answer")
    retention_events: int = Field(description="how many events the log keeps (per kind too)")

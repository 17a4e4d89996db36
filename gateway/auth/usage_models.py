"""The answer of ``GET /account/usage/daily`` as pydantic models, for the OpenAPI document only (the
route builds a plain dict: :func:`gateway.auth.usage_totals.totals_document`)."""

from __future__ import annotations

from pydantic import BaseModel, Field


class UsageFigures(BaseModel):
    credits: int = Field(description="credits charged (a refunded call counts 0)")
    calls: int = Field(description="calls, and a connection's deliveries")
    refunds: int = Field(description="calls refunded")


class UsageDay(UsageFigures):
    day: str = Field(description="the UTC day, YYYY-MM-DD")
    classes: dict[str, UsageFigures] = Field(description="the day's figures per method class ('other': no class)")


class UsageMethod(UsageFigures):
    method: str
    class_: str = Field(alias="class", description="the method's class in /pricing, or 'other'")


class UsageTotals(BaseModel):
    ok: bool
    from_: str = Field(alias="from", description="the first UTC day, YYYY-MM-DD")
    to: str = Field(description="today (UTC), YYYY-MM-DD")
    days: list[UsageDay] = Field(
        description="every day from `from` to `to`, oldest first; zeros on a day without calls"
    )
    methods: list[UsageMethod] = Field(description="the period's figures per method, most credits first")

"""The bodies of ``POST /account/confirm-deposit`` as pydantic models, for the OpenAPI document
(gateway/transports/openapi.py)."""

from __future__ import annotations

from pydantic import BaseModel, Field

from gateway.core.patterns import BASE58_SIGNATURE


class ConfirmDepositRequest(BaseModel):
    signature: str = Field(pattern=BASE58_SIGNATURE, description="base58 signature of the USDC transfer")


class ConfirmedDeposit(BaseModel):
    ok: bool
    credits_added: int
    new_balance: int = Field(description="the caller's own balance")
    already_processed: bool
    signature: str
    credited_pubkey: str
    credited_to_caller: bool
    amount_base_units: int
    bonus_credits: int

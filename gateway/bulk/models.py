"""The bodies of ``/bulk/*`` as pydantic models: request parsing (:mod:`gateway.bulk.endpoints`) and the OpenAPI
document's schemas (docs/api.md, Bulk lookups)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, Field

from gateway.bulk.rules import MAX_BULK_ITEMS


class BalancesRequest(BaseModel):
    addresses: list[str] = Field(
        min_length=1, max_length=MAX_BULK_ITEMS, description="base58 public keys; duplicates are looked up once"
    )


class TokenBalancesRequest(BaseModel):
    owners: list[str] = Field(
        min_length=1, max_length=MAX_BULK_ITEMS, description="base58 wallet addresses; duplicates are looked up once"
    )


class TransactionsRequest(BaseModel):
    signatures: list[str] = Field(
        min_length=1, max_length=MAX_BULK_ITEMS, description="base58 signatures; duplicates are looked up once"
    )


class BulkItemError(BaseModel):
    code: Literal["INVALID_ADDRESS", "INVALID_SIGNATURE", "UPSTREAM_ERROR", "TIMEOUT"]
    message: str


class Balance(BaseModel):
    address: str
    lamports: int = Field(ge=0, description="0 for an account that does not exist")


class AddressError(BaseModel):
    address: str
    error: BulkItemError


class BalancesAnswer(BaseModel):
    results: list[Balance]
    errors: list[AddressError] = Field(description="invalid addresses and failed lookups: not charged")


class TokenAccount(BaseModel):
    address: str = Field(description="the token account")
    mint: str
    amount: str = Field(pattern="^[0-9]+$", description="raw amount in base units, an integer string")
    decimals: int
    ui_amount: str = Field(pattern="^[0-9]+(\\.[0-9]+)?$", description="amount / 10^decimals, exact")
    program: Literal["spl-token", "spl-token-2022"]


class OwnerTokens(BaseModel):
    owner: str
    token_accounts: list[TokenAccount]


class OwnerError(BaseModel):
    owner: str
    error: BulkItemError


class TokenBalancesAnswer(BaseModel):
    results: list[OwnerTokens]
    errors: list[OwnerError] = Field(description="invalid owners and failed lookups: not charged")


class FoundTransaction(BaseModel):
    signature: str
    transaction: dict[str, Any] | None = Field(description="getTransaction's json encoding; null when absent")


class SignatureError(BaseModel):
    signature: str
    error: BulkItemError


class TransactionsAnswer(BaseModel):
    results: list[FoundTransaction]
    errors: list[SignatureError] = Field(description="invalid signatures and failed lookups: not charged")

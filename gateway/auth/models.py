"""The bodies of auth's routes as pydantic models, for the OpenAPI document (gateway/transports/openapi.py):
/auth (challenge, verify, logout), /account/api-key, and the /account views. The handlers build their
answers as plain dicts; tests/integration/test_openapi.py checks every answer against these schemas."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from gateway.core.patterns import BASE58_KEY, BASE58_SIGNATURE


class SignInInput(BaseModel):
    """The Wallet Standard's ``SolanaSignInInput`` for ``solana:signIn``: hand it to the wallet unchanged."""

    domain: str = Field(description="the gateway's configured public host[:port] (never a request's Host)")
    address: str = Field(pattern=BASE58_KEY)
    statement: str
    uri: str = Field(description="the gateway's public origin")
    version: Literal["1"]
    nonce: str = Field(pattern="^[0-9a-f]{64}$", description="the challenge")
    issuedAt: str = Field(description="ISO 8601 UTC")  # the Wallet Standard's names
    expirationTime: str = Field(description="ISO 8601 UTC: the challenge's expiry")


class Challenge(BaseModel):
    challenge: str = Field(pattern="^[0-9a-f]{64}$")
    expires_in: int
    sign_in: SignInInput = Field(description="Sign-In With Solana input naming the challenge (added here)")


class ChallengeRequest(BaseModel):
    pubkey: str = Field(pattern=BASE58_KEY, description="base58 Ed25519 public key")


class VerifyRequest(BaseModel):
    """``challenge`` (the hex challenge: an ordinary session) or ``message`` (Sign-In With Solana: an owner session)."""

    pubkey: str = Field(pattern=BASE58_KEY)
    challenge: str | None = Field(None, pattern="^[0-9a-f]{64}$")
    message: str | None = Field(
        None,
        max_length=2048,
        description="the signed Sign-In With Solana text (UTF-8 of the wallet's signedMessage), naming the challenge",
    )
    signature: str = Field(
        pattern=BASE58_SIGNATURE, description="base58 signature of the challenge's (or message's) UTF-8 text"
    )


class Token(BaseModel):
    token: str
    expires_in: int
    owner: bool = Field(description="an owner session (signed in with Sign-In With Solana; added here)")


class SessionEntry(BaseModel):
    id: str = Field(pattern="^[0-9a-f]{20}$")
    owner: bool
    created_at: str = Field(description="ISO 8601 UTC")
    last_used_at: str = Field(description="ISO 8601 UTC")
    origin: str | None = Field(description="the Origin header the session was made with")
    user_agent: str | None = Field(description="the User-Agent it was made with (at most 256 characters)")
    current: bool = Field(description="the session the request came with")


class SessionList(BaseModel):
    sessions: list[SessionEntry]
    max_sessions: int


class SessionsEnded(BaseModel):
    ok: Literal[True]
    ended: int


class LogoutAnswer(BaseModel):
    status: Literal["ok"]


class ApiKeyRequest(BaseModel):
    ref_code: str | None = None


class ApiKeyAnswer(BaseModel):
    ok: bool
    api_key: str
    message: str


class Funding(BaseModel):
    model_config = ConfigDict(extra="allow")

    asset: str
    network: str
    deposit_address: str
    credits_per_usdc: int
    credit_expiry_seconds: int
    credit_expiry_days: int
    attribution: str


class LastDeposit(BaseModel):
    signature: str
    amount_usdc: str
    credits: int
    timestamp: str


class CreditBatch(BaseModel):
    id: int
    source: str
    granted: int
    remaining: int
    expires_at: str


class SpendCap(BaseModel):
    daily_credits: int | None = Field(description="the most credits spent in a UTC day; null: no cap")
    spent_today: int = Field(description="credits the ledger's debits took today (UTC), as settled")
    remaining_today: int | None = Field(description="what the cap leaves of today; null: no cap")
    resets_at: str = Field(description="the next UTC midnight, ISO 8601")


class Account(BaseModel):
    model_config = ConfigDict(extra="allow")

    ok: bool
    pubkey: str
    balance: int
    pending_send_credits: int = Field(
        description="the part of balance held for sendAndConfirm calls whose outcome is not known yet"
    )
    deposit_address: str
    funding: Funding
    status: str
    total_consumed_credits: int
    created_at: int = Field(description="Unix seconds (docs/api.md's type)")
    last_deposit: LastDeposit | None
    credit_batches: list[CreditBatch]
    spend_cap: SpendCap = Field(description="the daily spend cap (docs/api.md, Spend cap; added here)")


class LedgerEntry(BaseModel):
    type: Literal["deposit", "bonus", "debit", "refund", "expiry", "adjustment"]
    amount: int
    balance: int
    description: str
    timestamp: str = Field(description="ISO 8601 UTC")
    signature: str | None = Field(description="the deposit's transaction signature (deposit, bonus)")


class HistoryEntry(BaseModel):
    method: str
    credits: int
    timestamp: str = Field(description="ISO 8601 UTC")
    request_id: str | None = Field(description="the call's X-Request-Id (`<id>:<n>` for item n of a batch)")
    refunded: bool
    calls: int = Field(
        description="deliveries this entry stands for: 1 for a call, more for a connection's notifications"
    )


class LedgerPage(BaseModel):
    entries: list[LedgerEntry]
    next_cursor: str | None


class HistoryPage(BaseModel):
    entries: list[HistoryEntry]
    next_cursor: str | None

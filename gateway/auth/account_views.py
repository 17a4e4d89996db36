"""The account resources as JSON, and the paging parameters of the listings. Pure.

Choices where docs/api.md says 'not shown' (documented here, tested in tests/auth):

* paging: see :mod:`gateway.auth.paging`;
* ``last_deposit``: ``{signature, amount_usdc (decimal string), credits, timestamp (ISO 8601 UTC)}``
  of the newest credited deposit, or null;
* ``pending_send_credits``: the part of ``balance`` held for ``sendAndConfirm`` calls whose outcome is
  not known yet (settled at the landing price, the base fee, or refunded); not spendable meanwhile;
* ``credit_batches`` elements: ``{id, source, granted, remaining, expires_at (ISO 8601 UTC)}``, for
  unexpired batches with credits left, soonest expiry first;
* timestamps: ISO 8601 in UTC with millisecond precision and a ``Z`` suffix.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import Any

from gateway.auth.payment_terms import MINIMUM_DEPOSIT_USDC, PaymentTerms
from gateway.auth.store.accounts import AccountRecord, BatchRecord, CallRecord, DepositRecord, LedgerRecord

USDC_DECIMALS = 6
ATTRIBUTION = "USDC must be sent from the same wallet public key that activates the account"
DEPOSIT_ENTRY_TYPES = frozenset({"deposit", "bonus"})
BELOW_MINIMUM = (
    f"a transfer of less than {MINIMUM_DEPOSIT_USDC} USDC is recorded but earns no credits and is not sent "
    "back automatically; ask the operator"
)


def iso8601(moment: datetime) -> str:
    return moment.astimezone(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def usdc_amount(base_units: int) -> str:
    """Base units as a plain decimal string: 10000 -> "0.01", 1500000 -> "1.5"."""
    value = (Decimal(base_units) / (10**USDC_DECIMALS)).normalize()
    return format(value, "f")


@dataclass(frozen=True, slots=True)
class Funding:
    """The account-independent part of ``funding``, from the payment terms and configuration."""

    terms: PaymentTerms
    credits_per_usdc: int
    credit_expiry_seconds: int

    @property
    def deposit_address(self) -> str:
        return self.terms.deposit_address

    def document(self) -> dict[str, Any]:
        """docs/api.md's fields, and (beyond it) the minimum, what happens below it, and when credits arrive."""
        terms = self.terms
        return {
            "asset": "USDC",
            "network": terms.network,
            "network_description": terms.network_description,
            "usdc_mint": terms.usdc_mint,
            "deposit_address": terms.deposit_address,
            "credits_per_usdc": self.credits_per_usdc,
            "credit_expiry_seconds": self.credit_expiry_seconds,
            "credit_expiry_days": self.credit_expiry_seconds // 86_400,
            "attribution": ATTRIBUTION,
            "minimum_deposit_usdc": MINIMUM_DEPOSIT_USDC,
            "below_minimum": BELOW_MINIMUM,
            "crediting": terms.crediting(),
        }


def deposit_document(deposit: DepositRecord | None) -> dict[str, Any] | None:
    if deposit is None:
        return None
    return {
        "signature": deposit.signature,
        "amount_usdc": usdc_amount(deposit.amount_base_units),
        "credits": deposit.credits,
        "timestamp": iso8601(deposit.created_at),
    }


def batch_document(batch: BatchRecord) -> dict[str, Any]:
    return {
        "id": batch.id,
        "source": batch.source,
        "granted": batch.granted,
        "remaining": batch.remaining,
        "expires_at": iso8601(batch.expires_at),
    }


def account_document(
    account: AccountRecord,
    *,
    balance: int,
    pending_send_credits: int,
    total_consumed: int,
    funding: Funding,
    last_deposit: DepositRecord | None,
    batches: Sequence[BatchRecord],
) -> dict[str, Any]:
    """The Account resource of ``GET /account/info``."""
    return {
        "ok": True,
        "pubkey": account.pubkey,
        "balance": balance,
        "pending_send_credits": pending_send_credits,
        "deposit_address": funding.deposit_address,
        "funding": funding.document(),
        "status": account.status,
        "total_consumed_credits": total_consumed,
        "created_at": int(account.created_at.timestamp()),
        "last_deposit": deposit_document(last_deposit),
        "credit_batches": [batch_document(b) for b in batches],
        "spend_cap": spend_cap_document(account.daily_spend_cap, account.spent_today),
    }


def spend_cap_document(cap: int | None, spent_today: int, now: datetime | None = None) -> dict[str, Any]:
    """The account's daily spend cap (docs/api.md, Spend cap; an added field of the Account): the cap
    (null: none), what today's settled debits took, what the cap leaves of today, and when the day turns.
    Here, not in :mod:`gateway.access.spend_cap`: ``GET /account/info`` shows it, and auth is below access."""
    at = now or datetime.now(UTC)
    resets = (at + timedelta(days=1)).replace(hour=0, minute=0, second=0, microsecond=0)
    return {
        "daily_credits": cap,
        "spent_today": spent_today,
        "remaining_today": None if cap is None else max(0, cap - spent_today),
        "resets_at": iso8601(resets),
    }


def ledger_entry(entry: LedgerRecord) -> dict[str, Any]:
    """docs/api.md's fields, and the transaction signature of deposit and bonus entries (else null)."""
    return {
        "type": entry.type,
        "amount": entry.amount,
        "balance": entry.balance_after,
        "description": entry.description,
        "timestamp": iso8601(entry.created_at),
        "signature": entry.ref if entry.type in DEPOSIT_ENTRY_TYPES else None,
    }


def history_entry(entry: CallRecord) -> dict[str, Any]:
    """docs/api.md's fields, and the call's ``request_id`` (its ``X-Request-Id``; ``<id>:<n>`` for item n
    of a batch) and whether it was refunded (then ``credits`` is 0), and the deliveries it stands for
    (``calls``: 1 for a call, more for a connection's notifications in one settlement)."""
    return {
        "method": entry.method,
        "credits": entry.credits,
        "timestamp": iso8601(entry.created_at),
        "request_id": entry.request_id,
        "refunded": entry.refunded,
        "calls": entry.calls,
    }

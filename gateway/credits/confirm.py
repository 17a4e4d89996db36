"""``POST /account/confirm-deposit``: credit one deposit at once instead of waiting for the watcher."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any

import orjson
from solders.signature import Signature

from gateway.core.credits import CreditPolicy, DepositCredit, DepositOutcome, EventHook, no_events
from gateway.core.deposits import scan_deposits
from gateway.core.errors import backend_unavailable, invalid_request, service_unavailable
from gateway.credits.chain_reads import (
    NOT_FINALIZED,
    RPC_TIMEOUT_S,
    credit_policy,
    deposit_ata_for,
    deposit_credits,
    get_finalized_transaction,
)
from gateway.credits.settings import CreditSettings
from gateway.credits.store import credit_deposit, ignored_reason
from gateway.node.http import ChainError, Upstream, UpstreamTimeout, UpstreamUnavailable, rpc_call
from gateway.pipeline.stages import Call, Reply, json_reply
from gateway.storage.connections import Pool
from gateway.storage.ledger import balance

# ------------------------------------------------------------------------------------ confirm-deposit


@dataclass(frozen=True)
class ConfirmedDeposit:
    """What confirm-deposit did: the summed outcome plus whom it credited (the transfer's authority)."""

    signature: str
    outcome: DepositOutcome
    credited_pubkey: str
    amount_base_units: int
    parts: tuple[tuple[DepositCredit, DepositOutcome], ...]

    credited_to_caller: bool = True

    def to_json(self) -> dict[str, Any]:
        return {
            "ok": True,
            "credits_added": self.outcome.credits_added,
            "new_balance": self.outcome.new_balance,
            "already_processed": self.outcome.already_processed,
            "signature": self.signature,
            "credited_pubkey": self.credited_pubkey,
            "credited_to_caller": self.credited_to_caller,
            "amount_base_units": self.amount_base_units,
            "bonus_credits": self.outcome.bonus_credits,
        }


def parse_signature(signature: Any) -> str:
    """The signature in canonical base58, or 400 INVALID_REQUEST."""
    if not isinstance(signature, str) or not signature:
        raise invalid_request("signature is required: a base58 transaction signature (64 bytes)")
    try:
        return str(Signature.from_string(signature.strip()))
    except ValueError as exc:
        raise invalid_request("signature is not a base58 transaction signature (64 bytes)") from exc


async def confirm_deposit(
    pool: Pool,
    upstream: Upstream,
    signature: str,
    policy: CreditPolicy,
    deposit_ata: str,
    usdc_mint: str,
    *,
    caller: str | None = None,
    timeout_s: float = RPC_TIMEOUT_S,
    events: EventHook = no_events,
) -> ConfirmedDeposit:
    """Credit the deposit in ``signature`` now instead of waiting for the watcher; 400 for anything else.

    Credit always goes to each transfer's authority (funding attribution), whoever asks. Deposit
    signatures are public, so the balance reported is the caller's own: the credited wallet's when the
    caller is it, else the caller's (``credited_to_caller`` false), never somebody else's.
    """
    sig = parse_signature(signature)
    try:
        statuses = await rpc_call(
            upstream, "getSignatureStatuses", [[sig], {"searchTransactionHistory": True}], timeout_s
        )
        status = _first_status(statuses)
        # The status check keeps a node that ignores `commitment` (the devnode does) from handing out
        # a transaction that is not final yet.
        finalized = status is not None and status.get("confirmationStatus") == "finalized"
        tx = await get_finalized_transaction(upstream, sig, timeout_s) if finalized else None
    except (UpstreamUnavailable, UpstreamTimeout, ChainError) as exc:
        raise backend_unavailable(f"could not read the transaction from the node: {exc}") from exc
    if tx is None:
        raise invalid_request(NOT_FINALIZED)

    scan = scan_deposits(tx, deposit_ata, usdc_mint)
    if not scan.transfers:
        raise invalid_request(scan.reason or "no USDC transfer to the deposit address in this transaction")
    slot = tx.get("slot")
    credits = deposit_credits(sig, slot if isinstance(slot, int) else None, scan.transfers)
    parts = tuple([(credit, await credit_deposit(pool, credit, policy, events)) for credit in credits])

    mine = next((p for p in parts if p[0].pubkey == caller), None)
    if not any(o.credited for _, o in parts):
        ignored = [await _ignored_reason(pool, credit, outcome) for credit, outcome in parts]
        if all(ignored):
            raise invalid_request(f"deposit not credited: {ignored[0]}")
    outcome = DepositOutcome(
        credited=any(o.credited for _, o in parts),
        already_processed=all(o.already_processed for _, o in parts),
        credits_added=sum(o.credits_added for _, o in parts),
        new_balance=mine[1].new_balance if mine else await _balance_of(pool, caller),
        ignored_reason=None,
        bonus_credits=sum(o.bonus_credits for _, o in parts),
    )
    return ConfirmedDeposit(
        signature=sig,
        outcome=outcome,
        credited_pubkey=(mine or parts[0])[0].pubkey,
        amount_base_units=sum(c.amount_base_units for c in credits),
        parts=parts,
        credited_to_caller=mine is not None,
    )


async def _balance_of(pool: Pool, caller: str | None) -> int:
    found = await balance(pool, caller) if caller is not None else None
    return found or 0


async def _ignored_reason(pool: Pool, credit: DepositCredit, outcome: DepositOutcome) -> str | None:
    """Why this deposit earns nothing, now or when it was first recorded (then the outcome says only "seen")."""
    if outcome.ignored_reason or not outcome.already_processed:
        return outcome.ignored_reason
    return await ignored_reason(pool, credit.signature)


def _first_status(statuses: Any) -> Mapping[str, Any] | None:
    value = statuses.get("value") if isinstance(statuses, dict) else None
    first = value[0] if isinstance(value, list) and value else None
    return first if isinstance(first, dict) else None


# ----------------------------------------------------------------------------------------- endpoint


async def no_notice(pubkey: str) -> None:
    return None


@dataclass
class DepositServices:
    """What the deposit paths need from a replica. The pool is looked up per call: it opens at start-up."""

    get_pool: Callable[[], Pool | None]
    upstream: Upstream
    policy: CreditPolicy
    deposit_ata: str
    usdc_mint: str
    events: EventHook = no_events
    #: Told which wallet was credited, so the replicas' cached "not enough credits" answers end at once.
    after_credit: Callable[[str], Awaitable[None]] = no_notice

    @classmethod
    def from_settings(
        cls,
        settings: CreditSettings,
        upstream: Upstream,
        get_pool: Callable[[], Pool | None],
        events: EventHook = no_events,
        after_credit: Callable[[str], Awaitable[None]] = no_notice,
    ) -> DepositServices:
        return cls(
            after_credit=after_credit,
            get_pool=get_pool,
            upstream=upstream,
            policy=credit_policy(settings),
            deposit_ata=str(deposit_ata_for(settings)),
            usdc_mint=settings.usdc_mint,
            events=events,
        )


class ConfirmDepositEndpoint:
    """``POST /account/confirm-deposit`` behind the auth stage: ``{signature}`` in, the outcome out."""

    def __init__(self, services: DepositServices) -> None:
        self.services = services

    async def __call__(self, call: Call) -> Reply:
        caller = call.authenticated().pubkey
        try:
            body = orjson.loads(call.body) if call.body else None
        except orjson.JSONDecodeError as exc:
            raise invalid_request('body must be JSON: {"signature": "<base58 signature>"}') from exc
        if not isinstance(body, dict) or "signature" not in body:
            raise invalid_request('body must be {"signature": "<base58 signature>"}')
        pool = self.services.get_pool()
        if pool is None:
            raise service_unavailable("the account database is not available yet", 5)
        services = self.services
        confirmed = await confirm_deposit(
            pool,
            services.upstream,
            body["signature"],
            services.policy,
            services.deposit_ata,
            services.usdc_mint,
            caller=caller,
            events=services.events,
        )
        for credit, outcome in confirmed.parts:
            if outcome.credited:
                await services.after_credit(credit.pubkey)
        return json_reply(200, confirmed.to_json())

"""``POST /x402/settle``: an x402 client's payment transaction, checked, co-signed if sponsored, sent.

What it accepts is decided in the core (:mod:`gateway.x402.rules`, pure); this module does the I/O
around it, in an order that keeps the sponsor's exposure to one fee per paying transaction:

1. not configured (``x402_settle`` off, or no fee-payer key on this machine) → 503, before reading anything;
2. the body, the transaction, the payment and (sponsored) the whitelist → 400 naming the cause;
3. the signature is claimed in PostgreSQL **before** the broadcast (:mod:`gateway.x402.store`):
   the same transaction again, from anyone, on any replica, is refused without a second broadcast;
4. ``sendTransaction`` with the node's preflight simulation on: a transaction that would fail
   (no USDC, no deposit account, a spent blockhash) is refused by the node before it is sent, so
   the sponsor pays no fee for it → 502 with the node's reason (503 when a sponsored one fails because
   the service's fee payer has no SOL);
5. the answer waits until the transaction is confirmed, at most :data:`CONFIRM_TIMEOUT_S`, so that
   ``success`` means the USDC moved. Past that wait it answers ``success: true`` with a message saying
   it is accepted but not yet confirmed (paying again could pay twice).

Credits are not assigned here: the caller confirms the deposit once it is finalized
(``POST /account/confirm-deposit``), or the deposit watcher finds it; either credits the transfer's
authority wallet.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

from solders.keypair import Keypair
from solders.pubkey import Pubkey
from solders.transaction import VersionedTransaction

from gateway.auth.account_views import usdc_amount
from gateway.auth.payment_terms import MINIMUM_DEPOSIT_BASE_UNITS, caip2_network
from gateway.base.config import ServiceSettings
from gateway.base.keys import ServiceKeys
from gateway.core.deposits import deposit_token_account
from gateway.core.errors import ProxyError, service_unavailable
from gateway.core.transactions import WireTx
from gateway.node.http import ChainError, Upstream, UpstreamTimeout, UpstreamUnavailable, rpc_call
from gateway.pipeline.stages import Call, Reply, json_reply
from gateway.storage.connections import Pool
from gateway.x402 import store as settlements
from gateway.x402.rules import (
    ComputeCaps,
    Payment,
    Refusal,
    SettleRules,
    check_payment,
    co_sign,
    decode_transaction,
    read_body,
    signed_transaction,
    sponsor_violation,
)
from gateway.x402.store import SettlementStatus

log = logging.getLogger(__name__)

#: docs/api.md's SEND timeout, and READ_CHEAP for each status poll.
SEND_TIMEOUT_S = 10.0
READ_TIMEOUT_S = 5.0
#: How long the answer waits for the transaction to be confirmed (mainnet: usually a few seconds).
CONFIRM_TIMEOUT_S = 30.0
POLL_INTERVAL_S = 0.4
#: Transaction errors meaning the fee payer could not pay the fee (it has no SOL, or too little).
_FEE_PAYER_BROKE = frozenset({"AccountNotFound", "InsufficientFundsForFee"})

Landing = Literal["confirmed", "failed", "unseen"]


@dataclass(frozen=True, slots=True)
class Landed:
    """A settled payment: confirmed (with its slot), or accepted by the node and not seen confirmed yet."""

    confirmed: bool
    slot: int | None


def refused(refusal: Refusal) -> ProxyError:
    """400 with the cause in the message and its stable name in ``data.reason``."""
    return ProxyError(400, "INVALID_REQUEST", refusal.message, data={"reason": refusal.reason.value})


def not_configured(message: str, reason: str = "settlement_not_configured") -> ProxyError:
    return ProxyError(503, "SETTLEMENT_NOT_CONFIGURED", message, data={"reason": reason})


def network_rejected(message: str, reason: str, signature: str) -> ProxyError:
    return ProxyError(502, "UPSTREAM_ERROR", message, data={"reason": reason, "signature": signature})


def preflight_summary(exc: ChainError) -> str:
    """The node's refusal in one line: its message, plus the program's own error line when it logged one."""
    logs = exc.data.get("logs") if isinstance(exc.data, dict) else None
    lines = [line for line in logs if isinstance(line, str)] if isinstance(logs, list) else []
    detail = next((line.removeprefix("Program log: ") for line in lines if "Error" in line), None)
    return f"{exc.message} ({detail})" if detail and detail not in exc.message else exc.message


def _preflight_err(exc: ChainError) -> Any:
    return exc.data.get("err") if isinstance(exc.data, dict) else None


@dataclass(frozen=True, slots=True)
class SettleOptions:
    """What a deployment decides about settling (from settings; tests shorten the waits)."""

    enabled: bool = True
    network: str = "solana:5eykt4UsFv8P8NJdTREpY1vzqKqZKvdp"  # CAIP-2, as in the payment terms
    crediting: str = "credits arrive about 30 seconds after the transfer is finalized"
    confirm_timeout_s: float = CONFIRM_TIMEOUT_S
    poll_interval_s: float = POLL_INTERVAL_S


class X402Settle:
    """The endpoint. ``fee_payer`` None means no usable key: settlement answers 503 until one is there."""

    def __init__(
        self,
        rules: SettleRules | None,
        fee_payer: Keypair | None,
        upstream: Upstream,
        get_pool: Callable[[], Pool | None],
        client_address: Callable[[Call], str | None] = lambda call: call.client,
        options: SettleOptions = SettleOptions(),
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.rules = rules
        self.fee_payer = fee_payer
        self.upstream = upstream
        self.get_pool = get_pool
        self.client_address = client_address
        self.options = options
        self.clock = clock

    @classmethod
    def from_settings(
        cls,
        settings: ServiceSettings,
        keys: ServiceKeys,
        upstream: Upstream,
        get_pool: Callable[[], Pool | None],
        client_address: Callable[[Call], str | None],
    ) -> X402Settle:
        """Signs with ``keys.signer``, read from ``<home>/keys/fee-payer.json`` where this machine has it
        (never created: gateway/base/keys.py); without it, settlement answers 503."""
        fee_payer = keys.signer
        if fee_payer is None and settings.x402_settle:
            log.error("x402 settlement off: no fee payer key %s on this machine", keys.fee_payer_file)
        rules = None
        if fee_payer is not None:
            ata = deposit_token_account(keys.deposit, Pubkey.from_string(settings.usdc_mint))
            minimum = MINIMUM_DEPOSIT_BASE_UNITS
            rules = SettleRules(str(keys.deposit), str(ata), settings.usdc_mint, fee_payer.pubkey(), minimum)
        options = SettleOptions(
            enabled=settings.x402_settle,
            network=caip2_network(settings.shown_network),
            crediting=f"credits arrive about {settings.crediting_delay_s} seconds after the transfer is finalized",
        )
        return cls(rules, fee_payer, upstream, get_pool, client_address, options)

    async def __call__(self, call: Call) -> Reply:
        rules, fee_payer = self.configured()
        encoded = read_body(call.body)
        if isinstance(encoded, Refusal):
            raise refused(encoded)
        tx = decode_transaction(encoded)
        if isinstance(tx, Refusal):
            raise refused(tx)
        verified = self.verify(tx, rules, fee_payer)
        if isinstance(verified, Refusal):
            raise refused(verified)
        payment, wire = verified
        landed = await self.settle(payment, wire, self.client_address(call))
        how = "confirmed" if landed.confirmed else "accepted by the network, not confirmed yet"
        return self._answer(payment, wire.signature, how)

    async def settle(self, payment: Payment, wire: WireTx, client: str | None) -> Landed:
        """Claim the signature, send, wait for it; a ProxyError (``data.reason``) when it is not settled."""
        pool = self.get_pool()
        if pool is None:
            raise service_unavailable("the settlement record (PostgreSQL) is not available yet", 5)
        signature = wire.signature
        claim = await settlements.claim(
            pool,
            signature,
            sponsored=payment.sponsored,
            fee_payer=str(wire.tx.message.account_keys[0]),
            authorities=payment.authorities,
            amount_base_units=payment.amount_base_units,
            client=client,
        )
        if not claim.claimed:
            raise ProxyError(
                400,
                "INVALID_REQUEST",
                f"transaction {signature} was settled before (status {claim.status}): a transaction is settled "
                'once. Credit it with POST /account/confirm-deposit {"signature": "' + signature + '"}',
                data={"reason": "duplicate_settlement", "signature": signature, "status": str(claim.status)},
            )
        return await self._settle(pool, payment, wire)

    def configured(self) -> tuple[SettleRules, Keypair]:
        if not self.options.enabled:
            raise not_configured(
                "x402 settlement is not configured on this gateway (x402_settle is off): send the USDC yourself "
                "and POST /account/confirm-deposit"
            )
        if self.rules is None or self.fee_payer is None:
            raise not_configured(
                "x402 settlement is not configured on this node: the fee payer's key is not on this machine"
            )
        return self.rules, self.fee_payer

    def verify(
        self, tx: VersionedTransaction, rules: SettleRules, fee_payer: Keypair, caps: ComputeCaps | None = None
    ) -> tuple[Payment, WireTx] | Refusal:
        """The payment and the transaction to send (co-signed when sponsored), or why not. ``caps``: the
        x402 header path's compute-budget ceilings (None: ``POST /x402/settle``'s single TransferChecked)."""
        payment = check_payment(tx, rules)
        if isinstance(payment, Refusal):
            return payment
        violation = sponsor_violation(payment, caps) if payment.sponsored else None
        if violation is not None:
            return violation
        wire = signed_transaction(co_sign(tx, fee_payer) if payment.sponsored else bytes(tx))
        if isinstance(wire, Refusal):
            return wire
        return payment, wire

    async def _settle(self, pool: Pool, payment: Payment, wire: WireTx) -> Landed:
        signature = wire.signature
        accepted = await self._send(pool, payment, wire)
        landing, err, slot = await self._landing(signature)
        if landing == "confirmed":
            await settlements.finish(pool, signature, SettlementStatus.CONFIRMED)
            log.info("x402 settled %s (%s, %d base units)", signature, _path(payment), payment.amount_base_units)
            return Landed(True, slot)
        if landing == "failed":
            await settlements.finish(pool, signature, SettlementStatus.FAILED, str(err))
            raise network_rejected(
                f"the transaction landed but failed: {err}; no USDC moved (its fee was paid)",
                "transaction_failed",
                signature,
            )
        if accepted:
            await settlements.finish(pool, signature, SettlementStatus.SUBMITTED)
            return Landed(False, None)
        raise network_rejected(  # stays pending: it may still land, so a replay is refused
            f"the node's answer was lost and transaction {signature} was not seen on chain within "
            f"{self.options.confirm_timeout_s:g} s; it may still land: check getSignatureStatuses before paying again",
            "outcome_unknown",
            signature,
        )

    async def _send(self, pool: Pool, payment: Payment, wire: WireTx) -> bool:
        """Broadcast with preflight; True when the node accepted it, False when its answer was lost."""
        options = {"encoding": "base64", "skipPreflight": False, "preflightCommitment": "confirmed"}
        try:
            await rpc_call(self.upstream, "sendTransaction", [wire.base64, options], SEND_TIMEOUT_S)
        except ChainError as exc:
            if _preflight_err(exc) == "AlreadyProcessed":  # sent before (by the caller itself): wait for it
                return True
            summary = preflight_summary(exc)
            await settlements.finish(pool, wire.signature, SettlementStatus.REJECTED, summary)
            raise self._rejection(payment, wire, exc, summary) from exc
        except UpstreamUnavailable as exc:
            if exc.sent:
                return False
            await settlements.finish(pool, wire.signature, SettlementStatus.REJECTED, str(exc))
            raise network_rejected(
                f"could not reach the node ({exc}): nothing was sent; retry", "node_unreachable", wire.signature
            ) from exc
        except UpstreamTimeout:
            return False
        return True

    def _rejection(self, payment: Payment, wire: WireTx, exc: ChainError, summary: str) -> ProxyError:
        err = _preflight_err(exc)  # a transaction error: a name, or an object such as {InstructionError: ...}
        if payment.sponsored and isinstance(err, str) and err in _FEE_PAYER_BROKE:
            fee_payer = wire.tx.message.account_keys[0]
            log.error("x402: the fee payer %s cannot pay fees (%s): fund it with SOL", fee_payer, summary)
            return not_configured(
                f"sponsored settlement is unavailable: the service's fee payer {fee_payer} has no SOL for fees "
                "right now; pay the fee yourself (self-paid: your wallet as fee payer) or retry later",
                "fee_payer_unfunded",
            )
        return network_rejected(
            f"the network rejected the transaction: {summary}; nothing was sent", "preflight_rejected", wire.signature
        )

    async def _landing(self, signature: str) -> tuple[Landing, Any, int | None]:
        """Poll the signature's status until it is confirmed or the wait is over; (outcome, its error, slot)."""
        deadline = self.clock() + self.options.confirm_timeout_s
        while True:
            status = await self._status(signature)
            if status is not None and status.get("confirmationStatus") in ("confirmed", "finalized"):
                err = status.get("err")
                slot = status.get("slot")
                slot = slot if isinstance(slot, int) else None
                return ("failed", err, slot) if err is not None else ("confirmed", None, slot)
            if self.clock() >= deadline:
                return "unseen", None, None
            await asyncio.sleep(self.options.poll_interval_s)

    async def _status(self, signature: str) -> dict[str, Any] | None:
        try:
            result = await rpc_call(self.upstream, "getSignatureStatuses", [[signature]], READ_TIMEOUT_S)
        except (ChainError, UpstreamUnavailable, UpstreamTimeout) as exc:  # keep polling until the deadline
            log.debug("x402: status of %s not read: %s", signature, exc)
            return None
        value = result.get("value") if isinstance(result, dict) else None
        first = value[0] if isinstance(value, list) and value else None
        return first if isinstance(first, dict) else None

    def _answer(self, payment: Payment, signature: str, how: str) -> Reply:
        payers = ", ".join(payment.authorities)
        message = (
            f"{usdc_amount(payment.amount_base_units)} USDC from {payers} {how} ({_path(payment)}). Credits are "
            f'not assigned here: once it is finalized, POST /account/confirm-deposit {{"signature": "{signature}"}} '
            f"credits {payers} at once, or the deposit watcher does ({self.options.crediting})"
        )
        document = {"success": True, "transaction": signature, "network": self.options.network, "message": message}
        return json_reply(200, document)


def _path(payment: Payment) -> str:
    return "sponsored: the service paid the fee" if payment.sponsored else "self-paid"

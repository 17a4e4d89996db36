"""The standard x402 flow on the JSON-RPC routes (docs/api.md, x402 settlement): the call that got the
402 comes again with its payment in ``PAYMENT-SIGNATURE`` (v2) or ``X-PAYMENT`` (v1), and is served.

:class:`PaidCalls` is the auth stage's payment hook, for calls that carry such a header and no
credentials. In order:

1. the per-address limit of ``/x402/settle`` (the group ``x402_settle``): settling costs the node a
   simulation and a sponsored one the fee payer's SOL, so an unauthenticated caller's work is bounded;
2. the header (bounded, then decoded: :mod:`gateway.x402.header`) and its transaction, checked by the
   settle rules with the x402 SDK's compute-budget instructions and memo allowed under
   :class:`ComputeCaps`; one paying wallet only, since the call is served as that wallet;
3. settled as ``/x402/settle`` does (the signature claimed in PostgreSQL before the broadcast, so a
   replayed or concurrent header is never sent or credited twice);
4. once confirmed, credited to the transfer's authority under the transaction's signature: the same
   deposit record confirm-deposit and the deposit watcher write, so either later credits nothing more;
5. the call goes on as the authority's wallet, billed from those credits, with ``PAYMENT-RESPONSE``.

A payment refused at 2, or a replay, a preflight rejection or a failed landing at 3, gets the 402 again
with the reason in the terms' ``error`` (and in ``data.reason``).
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from solders.keypair import Keypair

from gateway.auth.payment_terms import (
    SPONSORED_MAX_COMPUTE_UNIT_PRICE,
    SPONSORED_MAX_COMPUTE_UNITS,
    PaymentTerms,
    caip2_network,
    resource_url,
)
from gateway.core.errors import ProxyError, service_unavailable
from gateway.core.identity import Identity
from gateway.core.transactions import WireTx
from gateway.credits.chain_reads import deposit_credits
from gateway.credits.confirm import DepositServices
from gateway.credits.store import credit_deposit
from gateway.pipeline.stages import Call, Reply, Stage
from gateway.x402.header import (
    PAYMENT_RESPONSE,
    X_PAYMENT_RESPONSE,
    Offer,
    Terms,
    payment_header,
    read_offer,
    response_header,
    settle_response,
)
from gateway.x402.rules import ComputeCaps, Payment, Reason, Refusal, SettleRules, decode_transaction
from gateway.x402.settle import Landed, X402Settle

log = logging.getLogger(__name__)

CAPS = ComputeCaps(SPONSORED_MAX_COMPUTE_UNITS, SPONSORED_MAX_COMPUTE_UNIT_PRICE)
#: Answers of the settlement that mean the payment is not good (the caller's to fix): a 402 again.
_REFUSED_AT_SETTLEMENT = frozenset({"duplicate_settlement", "preflight_rejected", "transaction_failed"})
_DONE = Reply(204, b"")


class PaidCalls:
    """The payment hook of the JSON-RPC auth stage (:class:`gateway.auth.stage.AuthStage`)."""

    def __init__(
        self,
        settle: X402Settle,
        deposits: DepositServices,
        terms: Callable[[], PaymentTerms | None],
        limit: Stage,
    ) -> None:
        self.settle = settle
        self.deposits = deposits
        self.terms = terms
        self.limit = limit

    def offered(self, call: Call) -> bool:
        """A payment header and no credentials (credentials decide alone, as without the header)."""
        return call.credentials.empty and payment_header(call.headers) is not None

    async def __call__(self, call: Call) -> Identity:
        """The paying wallet's identity once its payment is settled and credited, or a 402/429/503."""
        paid: list[Identity] = []

        async def pay(call: Call) -> Reply:
            paid.append(await self._pay(call))
            return _DONE

        await self.limit(call, pay)
        return paid[0]

    async def _pay(self, call: Call) -> Identity:
        terms = self.terms()
        if terms is None:
            raise service_unavailable("the payment terms are not loaded yet", 5)
        rules, fee_payer = self.settle.configured()
        found = payment_header(call.headers)
        assert found is not None  # offered() said so
        offer = read_offer(found[1], Terms(caip2_network(terms.network), rules.usdc_mint, rules.deposit_wallet))
        if isinstance(offer, Refusal):
            raise _again(terms, call, offer.reason, offer.message)
        payment, wire = self._verified(terms, call, offer, rules, fee_payer)
        landed = await self._settled(terms, call, payment, wire)
        payer = payment.authorities[0]
        await self._credit(payment, wire.signature, landed.slot)
        document = settle_response(wire.signature, offer.network, payer, payment.amount_base_units)
        name = PAYMENT_RESPONSE if offer.version == 2 else X_PAYMENT_RESPONSE
        call.response_headers[name] = response_header(document)
        call.response_headers["Access-Control-Expose-Headers"] = f"{PAYMENT_RESPONSE}, {X_PAYMENT_RESPONSE}"
        return Identity(payer, "wallet")

    def _verified(
        self, terms: PaymentTerms, call: Call, offer: Offer, rules: SettleRules, fee_payer: Keypair
    ) -> tuple[Payment, WireTx]:
        tx = decode_transaction(offer.transaction)
        if isinstance(tx, Refusal):
            raise _again(terms, call, tx.reason, tx.message)
        verified = self.settle.verify(tx, rules, fee_payer, CAPS)
        if isinstance(verified, Refusal):
            raise _again(terms, call, verified.reason, verified.message)
        payment, wire = verified
        if len(payment.authorities) != 1:
            message = f"the payment is signed for by {len(payment.authorities)} wallets; the call is served as one"
            raise _again(terms, call, Reason.SEVERAL_PAYERS, message)
        return payment, wire

    async def _settled(self, terms: PaymentTerms, call: Call, payment: Payment, wire: WireTx) -> Landed:
        try:
            landed = await self.settle.settle(payment, wire, self.settle.client_address(call))
        except ProxyError as exc:
            reason = exc.data.get("reason") if isinstance(exc.data, dict) else None
            if reason in _REFUSED_AT_SETTLEMENT:
                raise _again(terms, call, str(reason), exc.message) from exc
            raise
        if not landed.confirmed:
            signature = wire.signature
            message = (
                f"transaction {signature} was accepted by the network but not seen confirmed in time; once it is "
                f'finalized, POST /account/confirm-deposit {{"signature": "{signature}"}} credits it'
            )
            raise _again(terms, call, "settlement_pending", message)
        return landed

    async def _credit(self, payment: Payment, signature: str, slot: int | None) -> None:
        """Credit the confirmed payment to its authority, keyed by the signature as confirm-deposit keys it."""
        deposits = self.deposits
        pool = deposits.get_pool()
        if pool is None:
            raise service_unavailable("the account database is not available yet", 5)
        for credit in deposit_credits(signature, slot, payment.transfers):
            outcome = await credit_deposit(pool, credit, deposits.policy, deposits.events)
            if outcome.credited:
                await deposits.after_credit(credit.pubkey)
            log.info("x402 header payment %s: %s credited %d", signature, credit.pubkey, outcome.credits_added)


def _again(terms: PaymentTerms, call: Call, reason: str, message: str) -> ProxyError:
    """The 402 again, the reason first in the terms' ``error`` and in ``data.reason``."""
    return terms.error(f"Payment refused ({reason}): {message}", resource_url(call), reason=str(reason))

"""The 402 payment terms: docs/api.md's -32002 ``data`` and the x402 v2 ``PaymentRequired`` document.

A 402 answers a caller who brought no credentials, or proved a key that has no account yet, and
tells both kinds of client how to pay:

* JSON-RPC clients read ``error`` (code -32002) and its ``data``: ``deposit_address``, ``usdc_mint``,
  ``minimum_deposit_usdc`` ("0.01"), ``network``, ``instructions`` (plus ``payTo`` and
  ``extra.feePayer``, the two x402 items docs/api.md names);
* x402 v2 clients read the base64 ``PAYMENT-REQUIRED`` header, whose JSON is the full
  ``PaymentRequired`` (``x402Version``, ``error``, ``resource``, ``accepts``).

The body (a JSON-RPC error on every route) carries the x402 fields too (``x402Version``, ``accepts``,
``resource``) beside the JSON-RPC envelope. Their one clash is ``error``: in the body it is the
JSON-RPC error object (JSON-RPC clients need it there), so x402's ``error`` string travels in the
header's document and as the JSON-RPC error's ``message``. x402 v2 clients read the header, so
nothing is lost to them.
"""

from __future__ import annotations

import base64
from dataclasses import dataclass
from typing import Any

import orjson

from gateway.auth.errors import payment_required
from gateway.base.config import DEVNODE
from gateway.core.errors import ProxyError
from gateway.pipeline.stages import Call

X402_VERSION = 2
MINIMUM_DEPOSIT_BASE_UNITS = 10_000  # 0.01 USDC (6 decimals)
MINIMUM_DEPOSIT_USDC = "0.01"
MAX_TIMEOUT_SECONDS = 60
PAYMENT_REQUIRED_HEADER = "PAYMENT-REQUIRED"
#: The ceilings of the compute-budget instructions a sponsored payment may carry when it is sent in the
#: paid call's ``PAYMENT-SIGNATURE`` header (the x402 SDK asks for 20,000 units at 1 micro-lamport),
#: published in ``extra.sponsored``: they bound the priority fee the service's fee payer pays
#: (docs/api.md, x402 settlement). ``POST /x402/settle`` allows no compute-budget instruction.
SPONSORED_MAX_COMPUTE_UNITS = 200_000
SPONSORED_MAX_COMPUTE_UNIT_PRICE = 10_000  # micro-lamports per unit

SOLANA_MAINNET = "solana:5eykt4UsFv8P8NJdTREpY1vzqKqZKvdp"
SOLANA_DEVNET = "solana:EtWTRABZaYq6iMfeYKouRu166VU2xqa1"
SOLANA_TESTNET = "solana:4uhcVJyU9pJkvQyS88uRDiswHXSCkY3z"
_CAIP2 = {
    # x402 clients are told the devnode is Solana devnet: a test network id the x402 SDK knows; they
    # point their own RPC at the devnode. Nothing of value moves on either.
    DEVNODE: SOLANA_DEVNET,
    "solana": SOLANA_MAINNET,
    "mainnet": SOLANA_MAINNET,
    "solana-mainnet": SOLANA_MAINNET,
    "mainnet-beta": SOLANA_MAINNET,
    "devnet": SOLANA_DEVNET,
    "solana-devnet": SOLANA_DEVNET,
    "testnet": SOLANA_TESTNET,
    "solana-testnet": SOLANA_TESTNET,
}


def caip2_network(name: str) -> str:
    """The CAIP-2 id of a network name; mainnet unless the name says devnet or testnet (or is CAIP-2)."""
    if name.startswith("solana:"):
        return name
    return _CAIP2.get(name.lower(), SOLANA_MAINNET)


@dataclass(frozen=True, slots=True)
class PaymentTerms:
    """What a depositor needs; the two public keys come from the service's keypair files at start."""

    deposit_address: str
    fee_payer: str | None  # None only with x402 settlement off and no fee payer configured
    usdc_mint: str
    network: str  # the name shown to depositors: "solana-mainnet", or "devnode" for the local test chain
    crediting_delay_s: int = 30  # after finalization; docs/api.md's mainnet figure unless the deployment says
    x402_settle: bool = False  # POST /x402/settle is served (the instructions name it)

    @property
    def test_chain(self) -> bool:
        return self.network == DEVNODE

    @property
    def network_description(self) -> str:
        if self.test_chain:
            return "the local devnode, a test chain: its USDC is test USDC, free and of no value"
        return self.network

    def crediting(self) -> str:
        """When credits arrive, as this deployment's deposit watcher delivers them."""
        return f"credits arrive about {self.crediting_delay_s} seconds after the transfer is finalized"

    def top_up(self, pubkey: str | None) -> str:
        """How to get (more) credits: the instructions of the 402 answers, one sentence first."""
        sender = f"the wallet {pubkey}" if pubkey else "the wallet whose public key you will sign with"
        chain = (
            "the local devnode (a test chain whose USDC is free and of no value)" if self.test_chain else self.network
        )
        how = (
            f"Send at least {MINIMUM_DEPOSIT_USDC} USDC (mint {self.usdc_mint}) on {chain} to the deposit address "
            f"{self.deposit_address} from {sender}; {self.crediting()}, or at once when you POST the transfer's "
            'signature to /account/confirm-deposit as {"signature": "<transfer signature>"}.'
        )
        if self.x402_settle:
            how += (
                " x402 clients may instead retry this call with the payment (terms in the PAYMENT-REQUIRED header) "
                "in a PAYMENT-SIGNATURE header: it is settled, credited at once and the call served; or POST the "
                'signed payment transaction to /x402/settle {"transaction": "<base64>"}, then confirm the deposit.'
            )
        if self.test_chain:
            how += " On this test deployment `gateway fund` mints test USDC, deposits it and prints an API key."
        return how

    def extra(self) -> dict[str, Any]:
        """``feePayer``, and what a sponsored payment in the ``PAYMENT-SIGNATURE`` header may carry."""
        if self.fee_payer is None:
            return {}
        sponsored = {
            "instructions": "one TransferChecked; at most one SetComputeUnitLimit, SetComputeUnitPrice and Memo",
            "maxComputeUnits": SPONSORED_MAX_COMPUTE_UNITS,
            "maxComputeUnitPriceMicroLamports": SPONSORED_MAX_COMPUTE_UNIT_PRICE,
            "settleRoute": "POST /x402/settle accepts the TransferChecked alone",
        }
        return {"feePayer": self.fee_payer, "sponsored": sponsored}

    def requirements(self) -> dict[str, Any]:
        """One x402 v2 ``PaymentRequirements`` for the SVM ``exact`` scheme."""
        return {
            "scheme": "exact",
            "network": caip2_network(self.network),
            "amount": str(MINIMUM_DEPOSIT_BASE_UNITS),
            "asset": self.usdc_mint,
            "payTo": self.deposit_address,
            "maxTimeoutSeconds": MAX_TIMEOUT_SECONDS,
            "extra": self.extra(),
        }

    def document(self, error: str, resource_url: str) -> dict[str, Any]:
        """The x402 v2 ``PaymentRequired``."""
        return {
            "x402Version": X402_VERSION,
            "error": error,
            "resource": {
                "url": resource_url,
                "description": "Prepaid credits for the Solana JSON-RPC gateway",
                "mimeType": "application/json",
            },
            "accepts": [self.requirements()],
        }

    def rpc_data(self, pubkey: str | None) -> dict[str, Any]:
        """The -32002 ``data`` object of docs/api.md, plus ``payTo`` and ``extra.feePayer``."""
        return {
            "deposit_address": self.deposit_address,
            "usdc_mint": self.usdc_mint,
            "minimum_deposit_usdc": MINIMUM_DEPOSIT_USDC,
            "network": self.network,
            "instructions": self.top_up(pubkey),
            "payTo": self.deposit_address,
            "extra": self.extra(),
        }

    def error(
        self, message: str, resource_url: str, pubkey: str | None = None, reason: str | None = None
    ) -> ProxyError:
        """The 402; ``reason`` (why a payment header was refused) goes into ``data.reason`` too."""
        document = self.document(message, resource_url)
        header = base64.b64encode(orjson.dumps(document)).decode("ascii")
        headers = {
            PAYMENT_REQUIRED_HEADER: header,
            "Access-Control-Expose-Headers": PAYMENT_REQUIRED_HEADER,
            "Cache-Control": "no-store",
        }
        x402 = {k: v for k, v in document.items() if k != "error"}
        data = self.rpc_data(pubkey)
        if reason is not None:
            data["reason"] = reason
        return payment_required(message, data, headers, x402)


def no_account(terms: PaymentTerms, call: Call, pubkey: str) -> ProxyError:
    """402 -32002 for a proven key that has no account record (yet)."""
    message = "Payment required: no account for this public key yet; deposit USDC to activate it"
    return terms.error(message, resource_url(call), pubkey)


#: The terms ride in the PAYMENT-REQUIRED header, which HTTP clients read up to 8 KiB (aiohttp's bound, and
#: many proxies'): a resource URL past this (a path of thousands of characters) is cut to its first segment.
MAX_RESOURCE_URL = 1024


def resource_url(call: Call) -> str:
    """The URL the caller asked for, as well as the request shows it (behind a proxy: forwarded headers),
    at most :data:`MAX_RESOURCE_URL` characters."""
    host = call.headers.get("x-forwarded-host") or call.headers.get("host") or "localhost"
    scheme = call.headers.get("x-forwarded-proto", "http").split(",")[0].strip() or "http"
    url = f"{scheme}://{host}{call.path}"
    if len(url) <= MAX_RESOURCE_URL:
        return url
    first = call.path.lstrip("/").split("/", 1)[0]
    return f"{scheme}://{host}/{first}"[:MAX_RESOURCE_URL]

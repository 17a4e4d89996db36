"""What the deposit paths read from the node and the settings: finalized transactions, the deposit
account, the credit policy. Shared by the watcher and by confirm-deposit.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from solders.pubkey import Pubkey

from gateway.base.keys import DEPOSIT_SETTING, DEPOSIT_WALLET, configured_address
from gateway.core.credits import CreditPolicy, DepositCredit
from gateway.core.deposits import DepositTransfer, deposit_token_account
from gateway.credits.settings import CreditSettings
from gateway.node.http import ChainError, Upstream, rpc_call

RPC_TIMEOUT_S = 15.0
UNSUPPORTED_TX_VERSION = -32015
NOT_FINALIZED = "transaction not found or not finalized yet; retry in ~30 s"


async def get_finalized_transaction(
    upstream: Upstream, signature: str, timeout_s: float = RPC_TIMEOUT_S
) -> dict[str, Any] | None:
    """``getTransaction`` (jsonParsed, finalized); a v1 transaction is fetched again with version 1 allowed."""
    cfg: dict[str, Any] = {"encoding": "jsonParsed", "commitment": "finalized", "maxSupportedTransactionVersion": 0}
    try:
        result = await rpc_call(upstream, "getTransaction", [signature, cfg], timeout_s)
    except ChainError as exc:
        if exc.code != UNSUPPORTED_TX_VERSION:
            raise
        result = await rpc_call(
            upstream, "getTransaction", [signature, {**cfg, "maxSupportedTransactionVersion": 1}], timeout_s
        )
    return result if isinstance(result, dict) else None


def deposit_credits(signature: str, slot: int | None, transfers: Sequence[DepositTransfer]) -> list[DepositCredit]:
    """One credit per authority wallet in the transaction, its transfers summed, keyed for exactly-once.

    The usual transaction has one transfer and gets the bare signature as its key. A transaction moving
    USDC in for several authorities gives the second and later ones ``<signature>:<n>`` (order of first
    appearance, the same on both paths), so each is still credited at most once.
    """
    totals: dict[str, int] = {}
    refusals: dict[str, str | None] = {}
    for transfer in transfers:
        totals[transfer.authority] = totals.get(transfer.authority, 0) + transfer.amount_base_units
        refusals[transfer.authority] = refusals.get(transfer.authority) or transfer.unsignable()
    return [
        DepositCredit(
            signature=signature if n == 0 else f"{signature}:{n}",
            pubkey=pubkey,
            amount_base_units=amount,
            slot=slot,
            refusal=refusals[pubkey],
        )
        for n, (pubkey, amount) in enumerate(totals.items())
    ]


def credit_policy(settings: CreditSettings) -> CreditPolicy:
    return CreditPolicy(
        credits_per_usdc=settings.credits_per_usdc,
        credit_expiry_seconds=settings.credit_expiry_seconds,
        referral_bonus_percent=settings.referral_bonus_percent,
    )


def deposit_ata_for(settings: CreditSettings) -> Pubkey:
    """The deposit wallet's USDC token account: the wallet is ``deposit_address``, which ``gateway up``
    hands every process it starts; without it :class:`~gateway.base.config.ConfigError` naming the setting
    (a serving process never creates a key: gateway/base/keys.py).
    """
    wallet = configured_address(settings.deposit_address, DEPOSIT_SETTING, settings.resolved_home / DEPOSIT_WALLET)
    return deposit_token_account(wallet, Pubkey.from_string(settings.usdc_mint))

"""Issue 6: the texts a caller is refused with say what to do, in sentences (a 402's instructions, a
wrong API key's refusal), for a dev gateway (the embedded devnode) and any other alike."""

from __future__ import annotations

import pytest

from gateway.auth.payment_terms import PaymentTerms
from gateway.auth.strategies import ApiKeyStrategy
from gateway.core.credentials import Credentials
from gateway.core.errors import ProxyError
from gateway.pipeline.stages import Call

CONFIRM = (
    "credits arrive about 30 seconds after the transfer is finalized, or at once when you POST the transfer's "
    'signature to /account/confirm-deposit as {"signature": "<transfer signature>"}.'
)


def terms(network: str) -> PaymentTerms:
    return PaymentTerms("DepositAddr", "FeePayer", "UsdcMint", network)


def test_the_devnode_instructions_are_one_sentence_then_gateway_fund() -> None:
    assert terms("devnode").top_up("Payer") == (
        "Send at least 0.01 USDC (mint UsdcMint) on the local devnode (a test chain whose USDC is free and of no "
        f"value) to the deposit address DepositAddr from the wallet Payer; {CONFIRM} On this test deployment "
        "`gateway fund` mints test USDC, deposits it and prints an API key."
    )


def test_the_mainnet_instructions_are_one_sentence() -> None:
    assert terms("solana-mainnet").top_up(None) == (
        "Send at least 0.01 USDC (mint UsdcMint) on solana-mainnet to the deposit address DepositAddr from the "
        f"wallet whose public key you will sign with; {CONFIRM}"
    )


class NoKeys:
    async def lookup(self, key: str) -> str | None:
        return None


@pytest.mark.parametrize(
    ("test_chain", "how"),
    [
        (True, "on this dev gateway `gateway fund` prints its wallet's current key; POST /account/api-key"),
        (False, "(a new key revokes the previous one); POST /account/api-key"),
    ],
)
async def test_a_wrong_api_key_says_how_to_get_the_current_one(test_chain: bool, how: str) -> None:
    strategy = ApiKeyStrategy(NoKeys(), test_chain)  # type: ignore[arg-type]
    with pytest.raises(ProxyError) as info:
        await strategy.authenticate(Credentials(api_key="k"), Call("POST", "/", {}, {}, b""), require_account=True)
    assert (info.value.status, info.value.constant) == (401, "AUTH_FAILED")
    assert info.value.message.startswith("invalid or revoked API key")
    assert how in info.value.message
    assert "signed by the account's wallet" in info.value.message and "shown once" in info.value.message
    assert ("gateway fund" in info.value.message) is test_chain

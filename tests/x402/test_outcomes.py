"""The outcomes a real node rarely shows on demand (an answer lost, a transaction landing and failing,
one not confirmed within the wait), with a scripted node in front of the settle endpoint and the real
PostgreSQL behind it: what the caller is told, what is recorded, and whether a replay may broadcast."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import asyncpg
import orjson
import pytest
from solders.hash import Hash
from solders.keypair import Keypair
from solders.transaction import VersionedTransaction

from gateway.core.deposits import deposit_token_account
from gateway.core.errors import ProxyError
from gateway.node.http import UpstreamTimeout, UpstreamUnavailable
from gateway.pipeline.stages import Call
from gateway.x402.rules import SettleRules, co_sign
from gateway.x402.settle import SettleOptions, X402Settle
from gateway.x402.store import SettlementStatus, status
from tests.chain import USDC_MINT
from tests.x402.helpers import body, build, pay

DEPOSIT = Keypair().pubkey()
SERVICE = Keypair()
RULES = SettleRules(
    str(DEPOSIT), str(deposit_token_account(DEPOSIT, USDC_MINT)), str(USDC_MINT), SERVICE.pubkey(), 10_000
)
QUICK = SettleOptions(confirm_timeout_s=0.2, poll_interval_s=0.05)


@dataclass
class ScriptedNode:
    """``sendTransaction`` raises ``send_error`` or answers; ``getSignatureStatuses`` answers ``status``."""

    send_error: Exception | None = None
    status: dict[str, Any] | None = None
    methods: list[str] = field(default_factory=list)

    async def post(self, raw: bytes, timeout_s: float, *, replayable: bool = False) -> bytes:
        call = orjson.loads(raw)
        self.methods.append(call["method"])
        if call["method"] == "sendTransaction":
            if self.send_error is not None:
                raise self.send_error
            result: Any = "accepted"
        else:
            result = {"context": {"slot": 1}, "value": [self.status]}
        return orjson.dumps({"jsonrpc": "2.0", "id": call["id"], "result": result})

    @property
    def sends(self) -> int:
        return self.methods.count("sendTransaction")


@pytest.fixture(scope="module")
async def pool(database_url: str) -> AsyncIterator[asyncpg.Pool]:
    p = await asyncpg.create_pool(database_url, min_size=1, max_size=4)
    yield p
    await p.close()


def settle_call() -> tuple[Call, str]:
    """A new sponsored payment (never on any chain: the node is scripted); the call, and its signature."""
    wallet = Keypair()
    raw = build(SERVICE.pubkey(), [pay(wallet.pubkey(), DEPOSIT, 10_000)], Hash.new_unique(), [wallet])
    call = Call("POST", "/x402/settle", {}, {}, body(raw), client="203.0.113.7")
    cosigned = VersionedTransaction.from_bytes(co_sign(VersionedTransaction.from_bytes(raw), SERVICE))
    return call, str(cosigned.signatures[0])  # the fee payer's signature names the transaction


async def run(node: ScriptedNode, pool: asyncpg.Pool, call: Call) -> tuple[int, dict[str, Any]]:
    endpoint = X402Settle(RULES, SERVICE, node, lambda: pool, options=QUICK)
    try:
        reply = await endpoint(call)
    except ProxyError as exc:
        return exc.status, {"error": exc.message, **exc.data}
    return reply.status, orjson.loads(reply.body)


async def test_accepted_but_not_confirmed_in_time_is_success_and_settled_once(pool: asyncpg.Pool) -> None:
    call, signature = settle_call()
    node = ScriptedNode()
    code, answer = await run(node, pool, call)
    assert code == 200 and answer["success"] is True and "not confirmed yet" in answer["message"], answer
    assert await status(pool, signature) is SettlementStatus.SUBMITTED

    code, answer = await run(node, pool, call)
    assert code == 400 and answer["reason"] == "duplicate_settlement" and node.sends == 1, answer


async def test_landed_and_failed_is_502_and_final(pool: asyncpg.Pool) -> None:
    call, signature = settle_call()
    err = {"InstructionError": [0, {"Custom": 1}]}
    node = ScriptedNode(status={"slot": 5, "confirmations": 0, "err": err, "confirmationStatus": "confirmed"})
    code, answer = await run(node, pool, call)
    assert code == 502 and answer["reason"] == "transaction_failed" and "Custom" in answer["error"], answer
    assert await status(pool, signature) is SettlementStatus.FAILED
    assert (await run(node, pool, call))[0] == 400 and node.sends == 1


@pytest.mark.parametrize("lost", [UpstreamTimeout("no answer within 10 s"), UpstreamUnavailable("cut", sent=True)])
async def test_a_lost_answer_is_502_and_stays_pending(pool: asyncpg.Pool, lost: Exception) -> None:
    call, signature = settle_call()
    node = ScriptedNode(send_error=lost)
    code, answer = await run(node, pool, call)
    assert code == 502 and answer["reason"] == "outcome_unknown" and "may still land" in answer["error"], answer
    assert await status(pool, signature) is SettlementStatus.PENDING  # it may land: a replay must not resend
    assert (await run(node, pool, call))[0] == 400 and node.sends == 1


async def test_a_lost_answer_that_landed_is_success(pool: asyncpg.Pool) -> None:
    call, signature = settle_call()
    node = ScriptedNode(
        send_error=UpstreamTimeout("no answer"), status={"err": None, "confirmationStatus": "confirmed"}
    )
    code, answer = await run(node, pool, call)
    assert code == 200 and "confirmed" in answer["message"], answer
    assert await status(pool, signature) is SettlementStatus.CONFIRMED


async def test_a_node_never_reached_is_502_and_may_be_settled_again(pool: asyncpg.Pool) -> None:
    call, signature = settle_call()
    node = ScriptedNode(send_error=UpstreamUnavailable("could not connect to the node", sent=False))
    code, answer = await run(node, pool, call)
    assert code == 502 and answer["reason"] == "node_unreachable", answer
    assert await status(pool, signature) is SettlementStatus.REJECTED

    node.send_error, node.status = None, {"err": None, "confirmationStatus": "finalized"}
    code, answer = await run(node, pool, call)
    assert code == 200 and node.sends == 2, answer
    assert await status(pool, signature) is SettlementStatus.CONFIRMED


async def test_without_a_database_it_is_503_and_nothing_is_sent() -> None:
    call, _ = settle_call()
    node = ScriptedNode()
    with pytest.raises(ProxyError) as refused:
        await X402Settle(RULES, SERVICE, node, lambda: None)(call)
    assert refused.value.status == 503 and node.methods == []


async def test_without_a_fee_payer_key_it_is_503() -> None:
    call, _ = settle_call()
    with pytest.raises(ProxyError) as refused:
        await X402Settle(None, None, ScriptedNode(), lambda: None)(call)
    assert refused.value.status == 503 and refused.value.constant == "SETTLEMENT_NOT_CONFIGURED"
    assert "fee payer's key is not on this machine" in refused.value.message

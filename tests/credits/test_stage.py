"""The metering stage in the real pipeline (parse → metering → forwarder) against a scripted node."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from typing import Any

import asyncpg
import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st

from gateway.app.features import method_registry
from gateway.base import metrics
from gateway.core.identity import Identity
from gateway.core.jsonrpc import Failure, RpcItem
from gateway.core.methods import MethodClass, PriceTable
from gateway.credits.meter import Meter
from gateway.credits.refunds import refund_reason
from gateway.credits.stage import CreditHeaders, MeteringStage, _answered, _refunded
from gateway.limits.rules import Limiter, Taken
from gateway.node.http import UpstreamTimeout, UpstreamUnavailable
from gateway.pipeline.http import http_call
from gateway.pipeline.stages import Call, Handler, Reply, ReplyStyle, Stage, compose, error_boundary
from gateway.rpc.forward import Forwarder, ParseStage
from gateway.storage.ledger import balance, check_conservation
from tests.credits.helpers import ScriptedNode, fund, new_pubkey, signed_tx

OWNER_KEY = "11111111111111111111111111111111"
PAYMENT = {"deposit_address": "Dep1", "usdc_mint": "Mint1", "minimum_deposit_usdc": "0.01"}


def top_up(pubkey: str | None) -> dict[str, Any]:
    return PAYMENT


@dataclass
class Gateway:
    meter: Meter
    node: ScriptedNode
    handler: Handler
    pubkey: str

    async def rpc(self, *calls: tuple[str, list[Any]], batch: bool = False) -> tuple[Reply, Any]:
        items = [{"jsonrpc": "2.0", "id": n, "method": m, "params": p} for n, (m, p) in enumerate(calls)]
        body = orjson.dumps(items if batch else items[0])
        reply = await self.handler(http_call("POST", "/", {}, style=ReplyStyle.JSONRPC, body=body))
        return reply, orjson.loads(reply.body)


@pytest.fixture
async def gateway(pool: asyncpg.Pool, pubkey: str) -> AsyncIterator[Callable[..., Gateway]]:
    meters: list[Meter] = []

    def build(rps: int = 50, concurrency: int = 4, events: Any = None) -> Gateway:
        meter = Meter(pool, **({"events": events} if events else {}))
        meters.append(meter)
        node = ScriptedNode()

        async def authenticate(call: Call, next_handler: Handler) -> Reply:
            call.identity = Identity(pubkey, "api_key")
            return await next_handler(call)

        stage = MeteringStage(meter, Limiter(rps, concurrency), top_up)
        stages: list[Stage] = [
            error_boundary,
            authenticate,
            CreditHeaders(stage),
            ParseStage(method_registry(), PriceTable.default()),
            stage,
        ]
        return Gateway(meter, node, compose(stages, Forwarder(node)), pubkey)

    yield build
    for meter in meters:
        await meter.stop()


def as_account(pubkey: str) -> Stage:
    async def authenticate(call: Call, next_handler: Handler) -> Reply:
        call.identity = Identity(pubkey, "api_key")
        return await next_handler(call)

    return authenticate


def assert_metered_headers(reply: Reply) -> None:
    for name in ("X-Credits-Remaining", "X-Request-Id", "X-Ratelimit-Limit", "X-Ratelimit-Remaining"):
        assert name in reply.headers, name
    assert int(reply.headers["X-Ratelimit-Reset"]) > 1_600_000_000


async def test_each_class_is_billed(
    gateway: Callable[..., Gateway], pool: asyncpg.Pool, db: asyncpg.Connection
) -> None:
    gw = gateway()
    await fund(pool, gw.pubkey, 2_000)
    calls: list[tuple[str, list[Any]]] = [
        ("getSlot", []),
        ("getTransaction", ["sig"]),
        ("getBlock", [1]),
        ("sendTransaction", [signed_tx()]),
    ]
    for method, params in calls:
        reply, body = await gw.rpc((method, params))
        assert reply.status == 200 and body["result"] == 1
        assert_metered_headers(reply)
    assert reply.headers["X-Credits-Remaining"] == str(2_000 - 1 - 5 - 25 - 2)
    assert "X-Credits-Low" not in reply.headers
    await gw.meter.flush()
    assert await balance(pool, gw.pubkey) == 2_000 - 33
    rows = await db.fetch("SELECT method, credits FROM usage_history WHERE pubkey = $1 ORDER BY id", gw.pubkey)
    assert [tuple(r) for r in rows] == [("getSlot", 1), ("getTransaction", 5), ("getBlock", 25), ("sendTransaction", 2)]


async def test_batch_items_are_billed_individually(gateway: Callable[..., Gateway], pool: asyncpg.Pool) -> None:
    gw = gateway()
    await fund(pool, gw.pubkey, 1_000)
    reply, body = await gw.rpc(("getSlot", []), ("requestAirdrop", []), ("getBlock", [1]), ("nope", []), batch=True)
    assert reply.status == 200
    assert [("result" in a, a.get("error", {}).get("code")) for a in body] == [
        (True, None),
        (False, -32601),
        (True, None),
        (False, -32601),
    ]
    assert gw.node.seen == ["getSlot", "getBlock"]
    await gw.meter.flush()
    assert await balance(pool, gw.pubkey) == 1_000 - 26
    assert reply.headers["X-Credits-Low"] == "true"


async def test_a_batch_counts_its_credits_once_per_class_and_outcome(
    gateway: Callable[..., Gateway], pool: asyncpg.Pool
) -> None:
    """gateway_credits_total gets one record per method class and outcome of a batch, with the sum of
    its items' credits (a record per item was the batch's largest per-item cost after parsing)."""
    records: list[tuple[float, tuple[str, ...]]] = []

    class Sink:
        def record(self, value: float, labels: tuple[str, ...]) -> None:
            records.append((value, labels))

    class Backend:
        def sink(self, spec: metrics.MetricSpec) -> Sink | metrics._Discard:
            return Sink() if spec.name == "gateway_credits_total" else metrics._DISCARD

    gw = gateway(rps=1_000)
    await fund(pool, gw.pubkey, 1_000)
    metrics.install(Backend())
    try:
        calls: list[tuple[str, list[Any]]] = [("getSlot", [])] * 40 + [("getBlock", [1])] * 3
        reply, body = await gw.rpc(*calls, batch=True)
    finally:
        metrics.uninstall()
    assert reply.status == 200 and all("result" in a for a in body)
    assert sorted(records) == [(40.0, ("READ_CHEAP", "charged")), (75.0, ("READ_HEAVY", "charged"))]


async def test_short_balance_in_a_batch_rejects_only_what_it_cannot_pay(
    gateway: Callable[..., Gateway], pool: asyncpg.Pool
) -> None:
    gw = gateway()
    await fund(pool, gw.pubkey, 3)
    reply, body = await gw.rpc(*[("getSlot", [])] * 5, batch=True)
    codes = [a.get("error", {}).get("code") for a in body]
    assert codes == [None, None, None, -32010, -32010]
    assert body[3]["error"]["message"] == "insufficient credits"
    assert len(gw.node.seen) == 3
    assert reply.headers["X-Credits-Remaining"] == "0"


async def test_single_call_without_credits_is_402(gateway: Callable[..., Gateway], pool: asyncpg.Pool) -> None:
    gw = gateway()
    reply, body = await gw.rpc(("getSlot", []))
    assert reply.status == 402 and body["error"]["code"] == -32002
    assert body["error"]["data"]["deposit_address"] == "Dep1"
    assert_metered_headers(reply)
    await fund(pool, gw.pubkey, 10)
    gw.meter.invalidate(gw.pubkey)
    reply, body = await gw.rpc(("getBlock", [1]))
    assert reply.status == 402 and body["error"] == {
        "code": -32010,
        "message": "insufficient credits",
        "data": {"required": 25, "available": 10, **PAYMENT},  # and how to top up
    }
    assert reply.headers["X-Credits-Remaining"] == "10" and reply.headers["X-Credits-Low"] == "true"
    assert gw.node.seen == []


@pytest.mark.parametrize(
    ("method", "error", "refunded"),
    [
        ("getBlock", {"code": -32004, "message": "Block 5 cleaned up, does not exist on node"}, True),
        ("getBlock", {"code": -32009, "message": "Slot 5 was skipped"}, False),
        # The node ran the preflight simulation it was asked for: charged (simulateTransaction costs more).
        ("sendTransaction", {"code": -32002, "message": "Transaction simulation failed"}, False),
        ("getSlot", {"code": -32005, "message": "Node is unhealthy"}, True),
        ("getSlot", {"code": -32005, "message": "Node is behind by 42 slots", "data": {"numSlotsBehind": 42}}, True),
        ("getAccountInfo", {"code": -32602, "message": "Invalid param"}, False),
    ],
)
async def test_refunds_by_answer(
    gateway: Callable[..., Gateway],
    pool: asyncpg.Pool,
    db: asyncpg.Connection,
    method: str,
    error: dict[str, Any],
    refunded: bool,
) -> None:
    gw = gateway()
    await fund(pool, gw.pubkey, 100)
    gw.node.errors[method] = error
    reply, body = await gw.rpc((method, [signed_tx()] if method == "sendTransaction" else ["x"]))
    assert reply.status == 200 and body["error"]["code"] == error["code"]
    await gw.meter.flush()
    price = {"getBlock": 25, "sendTransaction": 2, "getSlot": 1, "getAccountInfo": 1}[method]
    assert await balance(pool, gw.pubkey) == (100 if refunded else 100 - price)
    kinds = await db.fetch("SELECT type FROM ledger_entries WHERE pubkey = $1 ORDER BY id", gw.pubkey)
    assert [k["type"] for k in kinds] == ["deposit", "debit", *(["refund"] if refunded else [])]
    assert (await check_conservation(db, gw.pubkey)).ok


@pytest.mark.parametrize(
    ("failure", "status", "charged"),
    [
        (UpstreamTimeout(), 504, 2),  # reads refunded; the send may have been broadcast
        (UpstreamUnavailable("cut off", sent=True), 502, 2),
        (UpstreamUnavailable("refused", sent=False), 502, 0),  # provably never reached the node
    ],
)
async def test_whole_call_failures_follow_the_one_refund_rule(
    gateway: Callable[..., Gateway], pool: asyncpg.Pool, failure: Exception, status: int, charged: int
) -> None:
    gw = gateway()
    await fund(pool, gw.pubkey, 100)
    gw.node.fail = failure
    reply, _ = await gw.rpc(("getBlock", [1]), ("getSlot", []), ("sendTransaction", [signed_tx()]), batch=True)
    assert reply.status == status
    assert_metered_headers(reply)
    await gw.meter.flush()
    assert await balance(pool, gw.pubkey) == 100 - charged


async def test_a_call_that_reached_the_node_is_charged_when_the_caller_goes_away(
    gateway: Callable[..., Gateway], pool: asyncpg.Pool, db: asyncpg.Connection
) -> None:
    """Ray Serve cancels a request whose client disconnected: what was sent is charged all the same."""
    gw = gateway()
    await fund(pool, gw.pubkey, 100)
    gw.node.gate, gw.node.arrived = asyncio.Event(), asyncio.Event()
    call = asyncio.create_task(gw.rpc(("getBlock", [1]), ("sendTransaction", [signed_tx()]), batch=True))
    await gw.node.arrived.wait()  # the node has the request
    call.cancel()
    with pytest.raises(asyncio.CancelledError):
        await call
    await gw.meter.flush()
    assert await balance(pool, gw.pubkey) == 100 - 25 - 2
    rows = await db.fetch("SELECT method, refunded FROM usage_history WHERE pubkey = $1 ORDER BY id", gw.pubkey)
    assert [tuple(r) for r in rows] == [("getBlock", False), ("sendTransaction", False)]
    assert (await check_conservation(db, gw.pubkey)).ok


async def test_cancelled_while_taking_a_lease_releases_what_was_admitted(
    gateway: Callable[..., Gateway], pool: asyncpg.Pool, db: asyncpg.Connection
) -> None:
    """A batch cancelled between two admissions: the first item was never sent, so it is refunded,
    and the lease is left with nothing in flight (it would otherwise be renewed forever)."""
    gw = gateway()
    await fund(pool, gw.pubkey, 100)
    await gw.rpc(("getSlot", []))  # a small lease (about 20 credits): getBlock will need the store
    account = gw.meter.accounts[gw.pubkey]
    async with account.lock:  # the lease refill the second item needs waits here
        call = asyncio.create_task(gw.rpc(("getSlot", []), ("getBlock", [1]), batch=True))
        for _ in range(50):
            await asyncio.sleep(0)
        call.cancel()
        with pytest.raises(asyncio.CancelledError):
            await call
    assert all(lease.inflight == 0 for lease in account.leases)
    assert gw.node.seen == ["getSlot"]  # only the first call reached the node
    await gw.meter.flush()
    assert await balance(pool, gw.pubkey) == 99
    rows = await db.fetch("SELECT method, refunded FROM usage_history WHERE pubkey = $1 ORDER BY id", gw.pubkey)
    assert [tuple(r) for r in rows] == [("getSlot", False), ("getSlot", True)]


async def test_rate_limit_per_item_with_headers(
    gateway: Callable[..., Gateway], pool: asyncpg.Pool, db: asyncpg.Connection
) -> None:
    gw = gateway()
    await fund(pool, gw.pubkey, 100)
    await db.execute("UPDATE accounts SET rate_limit_rps = 3 WHERE pubkey = $1", gw.pubkey)
    reply, body = await gw.rpc(*[("getSlot", [])] * 4, batch=True)
    assert [a.get("error", {}).get("code") for a in body] == [None, None, None, -32005]
    assert body[3]["error"]["message"] == "rate limit exceeded"
    assert reply.headers["X-Ratelimit-Limit"] == "3" and reply.headers["X-Ratelimit-Remaining"] == "0"
    reply, body = await gw.rpc(("getSlot", []))
    assert reply.status == 429 and body["error"]["code"] == -32005
    assert int(reply.headers["Retry-After"]) >= 1
    assert reply.headers["X-Ratelimit-Remaining"] == "0" and "X-Credits-Remaining" in reply.headers
    await gw.meter.flush()
    assert await balance(pool, gw.pubkey) == 97  # rejected items cost nothing


async def test_concurrency_limit(gateway: Callable[..., Gateway], pool: asyncpg.Pool) -> None:
    gw = gateway(concurrency=1)
    await fund(pool, gw.pubkey, 100)
    gw.node.gate = asyncio.Event()
    gw.node.arrived = asyncio.Event()
    first = asyncio.create_task(gw.rpc(("getSlot", [])))
    await gw.node.arrived.wait()
    reply, body = await gw.rpc(("getSlot", []))
    assert reply.status == 429 and body["error"]["message"] == "concurrency limit exceeded"
    assert reply.headers["Retry-After"] == "1"
    gw.node.gate.set()
    reply, _ = await first
    assert reply.status == 200
    reply, _ = await gw.rpc(("getSlot", []))  # the slot was given back
    assert reply.status == 200


async def test_low_balance_event_fires_once(gateway: Callable[..., Gateway], pool: asyncpg.Pool) -> None:
    fired: list[tuple[str, str]] = []

    async def events(name: str, pubkey: str, data: dict[str, Any]) -> None:
        fired.append((name, pubkey))

    gw = gateway(events=events)
    await fund(pool, gw.pubkey, 1_030)
    for _ in range(3):
        await gw.rpc(("getBlock", [1]))
        await gw.meter.flush()
    assert fired == [("low_balance", gw.pubkey)]


async def test_errors_before_metering_carry_the_headers(gateway: Callable[..., Gateway], pool: asyncpg.Pool) -> None:
    gw = gateway()
    await fund(pool, gw.pubkey, 40)
    reply = await gw.handler(http_call("POST", "/", {}, style=ReplyStyle.JSONRPC, body=b"{not json"))
    assert reply.status == 400
    assert_metered_headers(reply)
    assert reply.headers["X-Credits-Remaining"] == "40"


async def test_unauthenticated_calls_are_never_forwarded(pool: asyncpg.Pool) -> None:
    node = ScriptedNode()
    stage = MeteringStage(Meter(pool), Limiter(50, 4), top_up)
    handler = compose([error_boundary, ParseStage(method_registry(), PriceTable.default()), stage], Forwarder(node))
    reply = await handler(
        http_call("POST", "/", {}, style=ReplyStyle.JSONRPC, body=b'{"jsonrpc":"2.0","id":1,"method":"getSlot"}')
    )
    assert reply.status == 402 and orjson.loads(reply.body)["error"]["code"] == -32002
    assert node.seen == []


async def test_ledger_outage_is_503_and_free(database_url: str, pubkey: str) -> None:
    broken = await asyncpg.create_pool(database_url, min_size=1, max_size=1)
    await broken.close()
    stage = MeteringStage(Meter(broken), Limiter(50, 4), top_up)

    async def authenticate(call: Call, next_handler: Handler) -> Reply:
        call.identity = Identity(pubkey, "api_key")
        return await next_handler(call)

    node = ScriptedNode()
    handler = compose(
        [error_boundary, authenticate, ParseStage(method_registry(), PriceTable.default()), stage], Forwarder(node)
    )
    reply = await handler(
        http_call("POST", "/", {}, style=ReplyStyle.JSONRPC, body=b'{"jsonrpc":"2.0","id":1,"method":"getSlot"}')
    )
    body = orjson.loads(reply.body)
    assert reply.status == 503 and body["error"]["code"] == -32003 and body["error"]["data"]["retry_after_secs"] == 5
    assert node.seen == []


async def test_unsettled_usage_is_known_until_flushed(gateway: Callable[..., Gateway], pool: asyncpg.Pool) -> None:
    """What /account/info takes off the settled balance: this replica's usage not yet flushed."""
    gw = gateway()
    await fund(pool, gw.pubkey, 100)
    await gw.rpc(("getBlock", [1]))
    assert await balance(pool, gw.pubkey) == 100 and gw.meter.unsettled(gw.pubkey) == 25  # not flushed yet
    await gw.meter.flush()
    assert await balance(pool, gw.pubkey) == 75 and gw.meter.unsettled(gw.pubkey) == 0


class LoopOnly(MeteringStage):
    """The stage without its one-step batch path: every item through the loop (the general path)."""

    def _admit_batch(self, *args: Any) -> Taken | None:
        return None


class CountingBatches(MeteringStage):
    """The stage as built, counting the batches its one-step path decided."""

    decided = 0

    def _admit_batch(self, *args: Any) -> Taken | None:
        taken = super()._admit_batch(*args)
        self.decided += taken is not None
        return taken


@pytest.mark.parametrize(("rps", "credits"), [(1_000, 10_000), (30, 10_000), (7, 10_000), (30, 400)])
async def test_a_batch_decided_in_one_step_answers_and_bills_as_the_item_loop(
    pool: asyncpg.Pool, db: asyncpg.Connection, rps: int, credits: int
) -> None:
    """The same batches, from the same funded state and clocks, through the stage as built and through
    the item loop alone: the same answers (rate-limited items included), the same headers, the same
    usage rows (each item charged or refunded by its class once) and the same balance after."""
    batch: list[tuple[str, list[Any]]] = [("getSlot", []), ("getTransaction", ["sig"]), ("getBlock", [1])] * 7
    batch += [("nope", []), ("getBalance", [OWNER_KEY])] * 2
    now = [100.0]
    outcomes = []
    for stage_class in (CountingBatches, LoopOnly):
        pubkey = new_pubkey()
        await fund(pool, pubkey, credits)
        await db.execute("UPDATE accounts SET rate_limit_rps = $2 WHERE pubkey = $1", pubkey, rps)
        meter = Meter(pool)
        stage = stage_class(meter, Limiter(50, 4), top_up, clock=lambda: now[0], wall=lambda: 1_700_000_000.0)
        node = ScriptedNode(errors={"getBlock": {"code": -32004, "message": "Block 1 cleaned up"}})
        handler = compose(
            [error_boundary, as_account(pubkey), ParseStage(method_registry(), PriceTable.default()), stage],
            Forwarder(node),
        )
        answers = []
        for step in (0.0, 0.0, 0.5):
            now[0] += step
            items = [{"jsonrpc": "2.0", "id": n, "method": m, "params": p} for n, (m, p) in enumerate(batch)]
            reply = await handler(http_call("POST", "/", {}, style=ReplyStyle.JSONRPC, body=orjson.dumps(items)))
            headers = {k: v for k, v in reply.headers.items() if k.startswith(("X-Ratelimit", "X-Credits"))}
            answers.append((reply.status, orjson.loads(reply.body), headers))
        await meter.flush()
        await meter.stop()
        rows = await db.fetch(
            "SELECT method, credits, refunded, split_part(request_id, ':', 2) AS item FROM usage_history"
            " WHERE pubkey = $1 ORDER BY id",
            pubkey,
        )
        outcomes.append((answers, [tuple(r) for r in rows], await balance(pool, pubkey), node.seen))
        if isinstance(stage, CountingBatches):
            assert stage.decided > 0  # the one-step path did decide (some of) them
    built, loop = outcomes
    assert built == loop
    assert any("error" in a for _, body, _ in built[0] for a in body) or rps == 1_000


ERRORS = st.sampled_from(
    [
        {"code": -32004, "message": "Block 5 cleaned up"},
        {"code": -32005, "message": "Node is unhealthy"},
        {"code": -32007, "message": "timed out"},
        {"code": -32003, "message": "backend down"},
        {"code": -32003, "message": "signature verification failed"},
        {"code": -32002, "message": "preflight"},
        {"message": "no code"},
        "not an object",
        None,
    ]
)


@given(
    refund=st.none() | st.just("a handler's refund"),
    response=st.none() | st.fixed_dictionaries({"id": st.just(1)}, optional={"result": st.integers(), "error": ERRORS}),
    sent=st.booleans(),
    failure=st.none() | st.sampled_from(Failure),
    method_class=st.sampled_from([MethodClass.READ_CHEAP, MethodClass.SEND, MethodClass.READ_HEAVY]),
)
def test_the_inline_charge_of_an_answered_item_agrees_with_refund_reason(
    refund: str | None, response: dict[str, Any] | None, sent: bool, failure: Failure | None, method_class: MethodClass
) -> None:
    """_complete decides an answered item without an error inline (_answered); every item is refunded exactly when
    the one rule of gateway/credits/refunds.py says so."""
    item = RpcItem(0, 1, "getSlot", method_class=method_class, response=response, sent=sent, failure=failure)
    item.refund = refund
    assert _refunded(item) == (refund_reason(item) is not None)
    assert not _answered(item) or refund_reason(item) is None  # what the batch charges in full is charged

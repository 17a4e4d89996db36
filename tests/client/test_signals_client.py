"""``GatewayClient.signals`` against the real gateway (tests/client/conftest.py: a feed devnode, the
signal classifier, the gateway in this process). Every stream is checked against the signal log
itself: the events of its window that match its filter, each once. The pure parts (filter,
de-duplication, backoff, close codes) are tested first, without a server."""

from __future__ import annotations

import asyncio
import os
import sys
import tomllib
from asyncio.subprocess import PIPE, STDOUT
from collections.abc import Callable
from pathlib import Path
from typing import Any

import aiohttp
import asyncpg
import pytest

from gateway.app.settings import Settings
from gateway.runtime.ports import free_port
from gateway.signals.rules import KINDS, PUMP, PUMP_AMM, WSOL
from gateway.signals.store import SignalLog
from gateway_client import (
    AuthFailed,
    GatewayClient,
    InsufficientCredits,
    RateLimited,
    RpcError,
    SignalEvent,
    SignalFilter,
    SignalStream,
)
from gateway_client import __version__ as client_version
from gateway_client import signals as client_signals
from gateway_client.errors import error_from_close
from gateway_client.signals import Backoff, SeenEvents, websocket_url
from tests.client.conftest import COMPUTE_BUDGET
from tests.pubsub.conftest import new_caller
from tests.support import RunningGateway, serve_gateway

REPO = Path(__file__).resolve().parents[2]
Key = tuple[Any, Any, Any]


# -- the pure parts --------------------------------------------------------------------------


def test_the_client_version_is_its_distribution_version() -> None:
    """The client's own distribution (clients/python), from 0.2.8 on as the interface says (signal helpers)."""
    project = tomllib.loads((REPO / "clients/python/pyproject.toml").read_text())["project"]
    assert client_version == project["version"] == "0.3.0"
    assert project["name"] == "solana-credit-gateway-client"


def test_filter_params_and_matching() -> None:
    assert SignalFilter.of().params() == [{}]
    wanted = SignalFilter.of("newPair", mint="M", programs=[PUMP, PUMP_AMM])
    assert wanted.params() == [{"kinds": ["newPair"], "mint": "M", "programs": sorted([PUMP, PUMP_AMM])}]
    assert wanted.kind == "newPair" and SignalFilter.of(["newPair", "graduation"]).kind is None
    event = {"kind": "newPair", "mint": "M", "program": PUMP}
    assert wanted.matches(event)
    assert not wanted.matches({**event, "kind": "largeSwap"})
    assert not wanted.matches({**event, "mint": "N"})
    assert not wanted.matches({**event, "program": COMPUTE_BUDGET})
    assert SignalFilter.of().matches({"kind": "anything"})


def test_seen_events_remember_a_bounded_number_of_keys() -> None:
    seen = SeenEvents(2)
    a, b, c = ({"signature": s, "kind": "newPair", "mint": "M"} for s in "abc")
    assert seen.first_time(a) and seen.first_time(b)
    assert not seen.first_time(a)
    assert seen.first_time({**a, "mint": "N"})  # a transaction that creates two pairs: two events
    assert seen.first_time(c) and len(seen) == 2
    assert seen.first_time(a)  # forgotten: the memory is bounded


def test_backoff_grows_with_jitter_up_to_its_cap() -> None:
    backoff = Backoff(first_s=0.5, max_s=4.0)
    delays = [backoff.next_delay() for _ in range(40)]
    for n, delay in enumerate(delays):
        base = min(4.0, 0.5 * 2**n)
        assert base / 2 <= delay <= base
    backoff.reset()
    assert backoff.next_delay() <= 0.5


def test_websocket_url_of_a_base_url() -> None:
    assert websocket_url("http://127.0.0.1:8000") == "ws://127.0.0.1:8000/ws"
    assert websocket_url("https://gw.example/v1/") == "wss://gw.example/v1/ws"


@pytest.mark.parametrize(
    ("code", "kind"),
    [
        (4001, AuthFailed),
        (1008, AuthFailed),
        (4002, InsufficientCredits),
        (4003, RateLimited),
        (1000, None),
        (1001, None),
        (1006, None),
        (1011, None),
        (1012, None),
        (1013, None),
        (None, None),
    ],
)
def test_close_codes_map_to_the_typed_errors(code: int | None, kind: type | None) -> None:
    error = error_from_close(code, "why")
    if kind is None:
        assert error is None
    else:
        assert type(error) is kind and error.code == code and error.message == "why"


# -- the stack -------------------------------------------------------------------------------


async def read_until(stream: SignalStream, done: Callable[[list[SignalEvent]], bool]) -> list[SignalEvent]:
    got: list[SignalEvent] = []
    async with asyncio.timeout(60):  # a bound on a hang, not a measurement
        while not done(got):
            got.append(await anext(stream))
    return got


def slots_seen(count: int) -> Callable[[list[SignalEvent]], bool]:
    """Enough events to span ``count`` slots: the window strictly between the first and the last has
    at least ``count - 2`` of them (the first and the last slot may have been read in part)."""
    return lambda got: len({e["slot"] for e in got}) >= count


def key(event: Any) -> Key:
    return event["signature"], event["kind"], event["mint"]


async def stored_between(log: SignalLog, first: int, last: int) -> list[dict[str, Any]]:
    """The log's events with ``first < slot < last`` (read page by page, newest first)."""
    events: list[dict[str, Any]] = []
    before = None
    while True:
        found = await log.recent(1000, since_slot=first, before=before)
        events += [s.event for s in found.events if s.event["slot"] < last]
        if not found.more:
            return events
        before = found.events[-1].id


async def assert_exactly_the_log(
    log: SignalLog, got: list[SignalEvent], wanted: Callable[[dict[str, Any]], bool]
) -> list[dict[str, Any]]:
    """The stream's events strictly inside its window are the log's that ``wanted`` keeps, each once;
    returns the log's events of the window (for the caller to see what the filter left out)."""
    keys = [key(e) for e in got]
    assert len(keys) == len(set(keys)), "an event yielded twice"
    first, last = got[0]["slot"], got[-1]["slot"]
    stored = await stored_between(log, first, last)
    inside = {key(e) for e in got if first < e["slot"] < last}
    assert inside == {key(e) for e in stored if wanted(e)}
    assert inside, "an empty window proves nothing"
    return stored


async def test_events_are_filtered_by_kind(signal_gateway: RunningGateway, api_key: str, signal_log: SignalLog) -> None:
    async with GatewayClient(signal_gateway.url, api_key=api_key) as client, client.signals(kinds="newPair") as stream:
        got = await read_until(stream, slots_seen(4))
    assert stream.subscription is not None and stream.subscription.startswith("sig_sub_")
    stored = await assert_exactly_the_log(signal_log, got, lambda e: e["kind"] == "newPair")
    assert {e["kind"] for e in stored} > {"newPair"}, "the window had no other kind to leave out"
    for event in got:  # the spec's fields, as the socket delivered them
        assert event["program"] == PUMP and event["curve_type"] in ("classic", "v2") and event["complete"] is False
        assert event["mint"] in event["accounts"] and isinstance(event["slot"], int)


async def test_events_are_filtered_by_program(
    signal_gateway: RunningGateway, api_key: str, signal_log: SignalLog
) -> None:
    async with GatewayClient(signal_gateway.url, api_key=api_key) as client, client.signals(programs=[PUMP]) as stream:
        got = await read_until(stream, slots_seen(4))
    stored = await assert_exactly_the_log(signal_log, got, lambda e: e["program"] == PUMP)
    assert any(e["program"] == COMPUTE_BUDGET for e in stored), "the window had no other program to leave out"


async def test_events_are_filtered_by_mint(signal_gateway: RunningGateway, api_key: str, signal_log: SignalLog) -> None:
    """A stream per new coin quoted in SOL (the feed trades those), opened as the coin launches, until
    one of them has events in three slots (a coin is traded a few times at random, then left)."""
    got: dict[str, list[SignalEvent]] = {}
    enough = slots_seen(3)
    async with GatewayClient(signal_gateway.url, api_key=api_key) as client:

        async def follow(mint: str) -> None:
            async with client.signals(mint=mint) as stream:
                async for event in stream:
                    got[mint].append(event)

        async def launch_followers() -> None:
            async with client.signals(kinds="newPair") as launches:
                async for launch in launches:
                    if launch["quote_asset"] in ("SOL", WSOL) and launch["mint"] is not None and len(got) < 8:
                        got[launch["mint"]] = []
                        tasks.append(asyncio.create_task(follow(launch["mint"])))

        tasks = [asyncio.create_task(launch_followers())]
        try:
            await until(lambda: any(enough(events) for events in got.values()), tasks)
        finally:
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
    mint, events = next((m, e) for m, e in got.items() if enough(e))
    stored = await assert_exactly_the_log(signal_log, events, lambda e: e["mint"] == mint)
    assert any(e["mint"] != mint for e in stored), "the window had no other mint to leave out"
    assert {e["kind"] for e in events} <= {"largeSwap", "walletActivity", "graduation"}


async def test_a_wallet_only_client_opens_a_session_for_the_socket(
    signal_gateway: RunningGateway, db: asyncpg.Connection
) -> None:
    async with aiohttp.ClientSession() as http:
        caller = await new_caller(http, signal_gateway, db, 10_000)
    async with (
        GatewayClient(signal_gateway.url, signer=caller.signer) as client,
        client.signals(kinds="newPair") as stream,
    ):
        event = await anext(stream)
        token = await client.session_token()  # the one the socket was opened with, not a new one
    assert event["kind"] == "newPair" and token and stream.connects == 1


async def test_a_revoked_session_is_renewed_once(signal_gateway: RunningGateway, db: asyncpg.Connection) -> None:
    """The socket closes 1008 for the logged-out token; the stream signs a new challenge and goes on."""
    async with aiohttp.ClientSession() as http:
        caller = await new_caller(http, signal_gateway, db, 10_000)
        async with GatewayClient(signal_gateway.url, signer=caller.signer) as client:
            revoked = await client.session_token()
            headers = {"Authorization": f"Bearer {revoked}"}
            async with http.post(f"{signal_gateway.url}/auth/logout", json={}, headers=headers) as resp:
                assert resp.status == 200, await resp.text()
            async with client.signals(kinds="newPair") as stream:
                event = await anext(stream)
            renewed = await client.session_token()
    assert event["kind"] == "newPair" and stream.connects == 1 and renewed != revoked


async def test_a_refused_filter_is_an_rpc_error(signal_gateway: RunningGateway, api_key: str) -> None:
    async with GatewayClient(signal_gateway.url, api_key=api_key) as client, client.signals(kinds="rugPull") as stream:
        with pytest.raises(RpcError) as refused:
            await anext(stream)
    assert refused.value.code == -32602 and "rugPull" in refused.value.message


async def test_a_bad_key_is_auth_failed(signal_gateway: RunningGateway) -> None:
    bad = "srpc_live_" + "A" * 43
    async with GatewayClient(signal_gateway.url, api_key=bad) as client, client.signals() as stream:
        with pytest.raises(AuthFailed) as refused:
            await anext(stream)
    assert refused.value.code == 4001 and refused.value.status == 401 and stream.connects == 0
    with pytest.raises(StopAsyncIteration):  # the stream ended: no reconnect with a refused key
        await anext(stream)


async def test_a_poor_account_is_insufficient_credits(signal_gateway: RunningGateway, db: asyncpg.Connection) -> None:
    async with aiohttp.ClientSession() as http:
        poor = await new_caller(http, signal_gateway, db, 9)  # below the socket's minimum of 10
    async with (
        GatewayClient(signal_gateway.url, api_key=poor.headers["X-Api-Key"]) as client,
        client.signals() as stream,
    ):
        with pytest.raises(InsufficientCredits) as refused:
            await anext(stream)
    assert refused.value.code == 4002 and refused.value.status == 402


async def test_running_dry_mid_stream_ends_with_the_gateways_reason(
    signal_gateway: RunningGateway, db: asyncpg.Connection
) -> None:
    async with aiohttp.ClientSession() as http:
        poor = await new_caller(http, signal_gateway, db, 15)  # the subscription (5), then a few events
    got: list[SignalEvent] = []
    async with (
        GatewayClient(signal_gateway.url, api_key=poor.headers["X-Api-Key"]) as client,
        client.signals() as stream,
    ):
        with pytest.raises(InsufficientCredits) as ended:
            async with asyncio.timeout(60):
                async for event in stream:
                    got.append(event)
    assert got, "the subscription was paid: events came first"
    assert ended.value.code == 4002
    assert ended.value.data == {"subscription": stream.subscription, "reason": "insufficient credits"}


async def test_the_stream_survives_a_gateway_restart_without_losing_or_repeating_an_event(
    settings: Settings, signal_log: SignalLog, db: asyncpg.Connection
) -> None:
    """The real disconnect: the gateway stops (uvicorn closes the socket 1012) while the classifier
    goes on, then starts again on the same port. What the log stored meanwhile comes back through the
    gap-fill; what the socket had delivered already is not yielded again."""
    port = free_port()
    kinds = ("newPair", "largeSwap")
    got: list[SignalEvent] = []
    first_server = serve_gateway(settings, port=port)
    gw = await first_server.__aenter__()
    second_server = None
    try:
        async with aiohttp.ClientSession() as http:
            key_ = (await new_caller(http, gw, db, 10_000)).headers["X-Api-Key"]
        async with GatewayClient(gw.url, api_key=key_) as client, client.signals(kinds=kinds) as stream:

            async def consume() -> None:
                async for event in stream:
                    got.append(event)

            consumer = asyncio.create_task(consume())
            try:
                await until(lambda: len(got) >= 5, [consumer])
                await first_server.__aexit__(None, None, None)
                first_server = None
                stopped_at = got[-1]["slot"]
                await until_stored(signal_log, stopped_at, kinds, consumer)  # the log moves on, no gateway
                second_server = serve_gateway(settings, port=port)
                await second_server.__aenter__()
                restarted_at = await signal_log.cursor()
                assert restarted_at is not None
                await until(lambda: stream.connects == 2 and got[-1]["slot"] > restarted_at + 3, [consumer])
            finally:
                consumer.cancel()
                await asyncio.gather(consumer, return_exceptions=True)
    finally:
        for server in (first_server, second_server):
            if server is not None:
                await server.__aexit__(None, None, None)
    assert stream.gap_filled > 0, "the events stored while the gateway was down came from the gap-fill"
    assert any(e["slot"] <= stopped_at for e in got) and any(e["slot"] > restarted_at for e in got)
    await assert_exactly_the_log(signal_log, got, lambda e: e["kind"] in kinds)


async def until(condition: Callable[[], bool], consumers: list[asyncio.Task[None]]) -> None:
    """Wait for ``condition``; a consumer's own failure is raised at once."""
    async with asyncio.timeout(90):  # a bound on a hang, not a measurement
        while not condition():
            for task in consumers:
                if task.done():
                    task.result()
                    raise AssertionError("a stream ended")
            await asyncio.sleep(0.05)


async def until_stored(log: SignalLog, after_slot: int, kinds: tuple[str, ...], consumer: asyncio.Task[None]) -> None:
    """Until the log holds a few events of ``kinds`` after ``after_slot``."""
    async with asyncio.timeout(60):
        while True:
            found = await log.recent(100, since_slot=after_slot + 1)
            if sum(e.event["kind"] in kinds for e in found.events) >= 3:
                return
            if consumer.done():
                consumer.result()
            await asyncio.sleep(0.1)


def test_the_client_knows_every_kind() -> None:
    assert client_signals.KINDS == KINDS


async def test_the_example_prints_live_events(signal_gateway: RunningGateway, api_key: str) -> None:
    """examples/signals.py against a gateway with traffic (the stack of test_first_hour has no feed)."""
    env = {**os.environ, "GATEWAY_URL": signal_gateway.url, "GATEWAY_API_KEY": api_key, "SIGNALS_EVENTS": "3"}
    env["SIGNALS_SECONDS"] = "60"  # ends after 3 events; the bound is for a hang
    process = await asyncio.create_subprocess_exec(
        sys.executable, str(REPO / "examples" / "signals.py"), env=env, stdout=PIPE, stderr=STDOUT
    )
    output = (await process.communicate())[0].decode()
    assert process.returncode == 0, output
    assert output.count("\nlive ") == 3 and "live: 3 events" in output and "subscription sig_sub_1" in output, output

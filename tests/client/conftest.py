"""A gateway with signals: a feed devnode making pump.fun traffic, the signal classifier writing the
signal log in the session's Redis, and the gateway served in this process following it. For the
client's signal tests and for the signals notebook (tests/integration/test_notebook.py)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import aiohttp
import asyncpg
import pytest
import redis.asyncio as aioredis

from devnode.node import Devnode
from gateway.app.settings import Settings
from gateway.signals.classifier_actor import SignalClassifierActor
from gateway.signals.rules import KINDS, PUMP, PUMP_AMM
from gateway.signals.store import SignalLog
from tests.feed import feed_devnode
from tests.pubsub.conftest import new_caller
from tests.sending.conftest import sending_settings
from tests.support import RunningGateway, serve_gateway

__all__ = ["COMPUTE_BUDGET", "api_key", "chain", "settings", "signal_gateway", "signal_log"]

#: The first instruction of every feed transaction: watched too, so that walletActivity events name a
#: program other than pump's and the program filter has something to leave out.
COMPUTE_BUDGET = "ComputeBudget111111111111111111111111111111"


@pytest.fixture(scope="module")
async def chain(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Devnode]:
    async with feed_devnode(tmp_path_factory.mktemp("signals-client-node")) as node:
        yield node


@pytest.fixture(scope="module")
def settings(tmp_path_factory: pytest.TempPathFactory, database_url: str, redis_url: str, chain: Devnode) -> Settings:
    """Every SOL trade is a largeSwap, and the feed's traders are watched wallets: many events of
    several kinds, mints and programs."""
    traders = [str(key) for key in chain._feed.traders]  # the feed's generated wallets
    return sending_settings(
        tmp_path_factory.mktemp("signals-client-home"),
        database_url,
        redis_url,
        chain.rpc_url,
        upstream_ws_url=chain.ws_url,
        signal_programs=[PUMP, PUMP_AMM, COMPUTE_BUDGET],
        signal_wallets=traders,
        signal_large_swap_lamports=1,
    )


@pytest.fixture(scope="module")
async def signal_log(settings: Settings, redis_url: str) -> AsyncIterator[SignalLog]:
    """The ``signal-classifier`` actor's class (no Ray: its own thread and loop) following the chain
    into a fresh signal log: another module's chain may have left its cursor in the session's Redis."""
    redis = aioredis.Redis.from_url(redis_url)
    log = SignalLog(redis, retention=settings.signal_retention_events)
    await redis.delete(log.stream, log.cursor_key, *(log.kind_stream(kind) for kind in KINDS))
    actor = SignalClassifierActor(settings.model_dump(mode="json"))
    try:
        yield log
    finally:
        await asyncio.to_thread(actor.shutdown)
        await redis.aclose()


@pytest.fixture(scope="module")
async def signal_gateway(settings: Settings, signal_log: SignalLog) -> AsyncIterator[RunningGateway]:
    async with serve_gateway(settings) as gw:
        yield gw


@pytest.fixture
async def api_key(signal_gateway: RunningGateway, db: asyncpg.Connection) -> str:
    async with aiohttp.ClientSession() as http:
        caller = await new_caller(http, signal_gateway, db, 10_000)
    return caller.headers["X-Api-Key"]

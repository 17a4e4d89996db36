"""The operator's changes to the pool (gateway/upstreams/store.py, migration 0030) on the real PostgreSQL, and
the pool's owner following them (gateway/node/health.py): a node added, cordoned, removed and restored, each
an ``operator_actions`` row naming the node only; refusals that write nothing."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator

import asyncpg
import pytest

from devnode.node import Devnode
from gateway.core.upstreams import Role, UpstreamNode
from gateway.node.health import HealthSettings, PoolHealth
from gateway.storage.operator import OperatorRefusal
from gateway.upstreams import store

SECRET = "k3y-1n-th3-url"


@pytest.fixture
async def clean(db: asyncpg.Connection) -> AsyncIterator[asyncpg.Connection]:
    """No change of the pool before or after (the operator_actions rows stay: the table is append-only)."""
    await db.execute("DELETE FROM upstream_changes")
    yield db
    await db.execute("DELETE FROM upstream_changes")


def node(name: str, url: str, roles: tuple[Role, ...] = ()) -> UpstreamNode:
    return UpstreamNode(name=name, rpc_url=url, roles=roles)


async def audit(db: asyncpg.Connection, since: int) -> list[tuple[str, str]]:
    rows = await db.fetch("SELECT action, detail::text AS d FROM operator_actions WHERE id > $1 ORDER BY id", since)
    return [(r["action"], json.loads(r["d"])["node"]) for r in rows]


async def test_add_cordon_remove_restore_each_audited_by_name(
    clean: asyncpg.Connection, devnode: Devnode, monkeypatch: pytest.MonkeyPatch
) -> None:
    db = clean
    since = await db.fetchval("SELECT coalesce(max(id), 0) FROM operator_actions")
    configured = [node("a", devnode.rpc_url), node("b", devnode.rpc_url)]
    monkeypatch.setenv("C_RPC_URL", f"{devnode.rpc_url}/?api-key={SECRET}")
    added = UpstreamNode.model_validate({"name": "c", "rpc_url": {"env": "C_RPC_URL"}, "roles": [Role.HEAVY]})
    await store.add(db, added, configured, "an indexer", "ops")
    await store.cordon(db, "a", configured, "upgrade", "ops")
    await store.remove(db, "b", configured, "decommissioned", "ops")
    changes = await store.read_changes(db)
    assert [n.name for n in changes.apply(configured)] == ["a", "c"] and dict(changes.cordoned) == {"a": "upgrade"}
    await store.restore(db, "b", configured, "back", "ops")
    await store.cordon(db, "a", configured, "done", "ops", on=False)
    changes = await store.read_changes(db)
    assert [n.name for n in changes.apply(configured)] == ["a", "b", "c"] and not changes.cordoned
    rows = await audit(db, since)
    assert rows == [
        ("upstream_add", "c"),
        ("upstream_cordon", "a"),
        ("upstream_remove", "b"),
        ("upstream_add", "b"),
        ("upstream_uncordon", "a"),
    ]
    logged = await db.fetch("SELECT detail::text AS d FROM operator_actions WHERE id > $1", since)
    assert SECRET not in str([r["d"] for r in logged])  # the audit names the node, never its URL
    assert SECRET not in await db.fetchval("SELECT node::text FROM upstream_changes WHERE name = 'c'")


async def test_a_secret_given_as_a_value_is_never_stored(clean: asyncpg.Connection, devnode: Devnode) -> None:
    db = clean
    since = await db.fetchval("SELECT coalesce(max(id), 0) FROM operator_actions")
    configured = [node("a", devnode.rpc_url)]
    leaky = [
        node("c", f"{devnode.rpc_url}/?api-key={SECRET}"),
        UpstreamNode(name="c", rpc_url=devnode.rpc_url, headers={"x-api-key": SECRET}),
        UpstreamNode(name="c", rpc_url=devnode.rpc_url, grpc_url="http://127.0.0.1:1", grpc_token=SECRET),
    ]
    for entry in leaky:
        with pytest.raises(OperatorRefusal, match="given as a value would be stored as one") as refused:
            await store.add(db, entry, configured, "x", "ops")
        assert SECRET not in str(refused.value)
    assert await db.fetchval("SELECT count(*) FROM upstream_changes") == 0
    assert await audit(db, since) == []


async def test_refusals_write_nothing(clean: asyncpg.Connection, devnode: Devnode) -> None:
    db = clean
    since = await db.fetchval("SELECT coalesce(max(id), 0) FROM operator_actions")
    configured = [node("a", devnode.rpc_url), node("idx", devnode.rpc_url, (Role.HEAVY,))]
    with pytest.raises(OperatorRefusal, match="a is a configured node: it is in the pool already"):
        await store.add(db, node("a", devnode.rpc_url), configured, "x", "ops")
    with pytest.raises(OperatorRefusal, match="a is the last node that serves reads"):
        await store.remove(db, "a", configured, "x", "ops")
    with pytest.raises(OperatorRefusal, match="nope is not in the pool"):
        await store.cordon(db, "nope", configured, "x", "ops")
    with pytest.raises(OperatorRefusal, match="a is not cordoned"):
        await store.cordon(db, "a", configured, "x", "ops", on=False)
    with pytest.raises(OperatorRefusal, match="a is not a configured node that was removed"):
        await store.restore(db, "a", configured, "x", "ops")
    assert await audit(db, since) == []
    assert await db.fetchval("SELECT count(*) FROM upstream_changes") == 0


async def test_the_owner_follows_the_changes(clean: asyncpg.Connection, database_url: str, devnode: Devnode) -> None:
    db = clean
    configured = [node("a", devnode.rpc_url)]
    pool = await asyncpg.create_pool(database_url, min_size=1, max_size=2)
    owner = PoolHealth(
        configured, HealthSettings(probe_s=0.1, judge_s=0.05, changes_s=0.05), lambda: store.read_changes(pool)
    )
    stop = asyncio.Event()
    running = asyncio.create_task(owner.run(stop))
    try:
        await store.add(db, node("b", devnode.rpc_url), configured, "more", "ops")
        await store.cordon(db, "a", configured, "upgrade", "ops")

        async def settled() -> bool:
            names = {v.name: v for v in owner.view.nodes}
            return set(names) == {"a", "b"} and names["b"].in_service and names["a"].reason == "cordoned: upgrade"

        deadline = asyncio.get_running_loop().time() + 10
        while not await settled():
            assert asyncio.get_running_loop().time() < deadline, owner.status()
            await asyncio.sleep(0.05)
        await store.remove(db, "b", configured, "less", "ops")
        while "b" in {v.name for v in owner.view.nodes}:
            assert asyncio.get_running_loop().time() < deadline, owner.status()
            await asyncio.sleep(0.05)
    finally:
        stop.set()
        await running
        await pool.close()

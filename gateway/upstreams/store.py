"""The operator's changes to the pool (``upstream_changes``, migration 0030): read by the pool's owner every
half second, written by ``gateway upstreams`` with an ``operator_actions`` row each. A node is named by its
``name`` in the audit row; an added node's entry lives only in ``upstream_changes``, its secrets (a URL
holding a key, the headers, the x-token) as references only (``{"env": NAME}``, ``{"file": PATH}``:
:class:`gateway.core.upstreams.SecretRef`), which the pool's owner reads in its own environment.

A refusal is :class:`gateway.storage.operator.OperatorRefusal`, and nothing is written then.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

import asyncpg
from pydantic import ValidationError

from gateway.core.upstreams import Role, UpstreamNode, check_pool
from gateway.node.health import Changes
from gateway.storage.connections import Pool
from gateway.storage.errors import postgres_call
from gateway.storage.operator import OperatorRefusal, record_action

log = logging.getLogger(__name__)


@postgres_call("reading the upstream pool's changes")
async def read_changes(db: Pool | asyncpg.Connection) -> Changes:
    rows = await db.fetch("SELECT name, node::text AS node, removed, cordoned FROM upstream_changes ORDER BY added")
    return Changes(
        added=tuple(n for r in rows if r["node"] and not r["removed"] if (n := _node(r["name"], r["node"]))),
        removed=frozenset(r["name"] for r in rows if r["removed"]),
        cordoned={r["name"]: r["cordoned"] for r in rows if r["cordoned"] is not None},
    )


#: The entries already logged as left out (the owner reads the changes twice a second: one line each).
_left_out: set[tuple[str, str]] = set()


def _node(name: str, entry: str) -> UpstreamNode | None:
    """An added node's entry, its references read here; None (logged once, by name and reason) when one
    cannot be: the rest of the pool's changes still apply."""
    try:
        return UpstreamNode.model_validate_json(entry)
    except ValidationError as exc:
        reasons = "; ".join(str(e["msg"]) for e in exc.errors(include_input=False))
        if (name, reasons) not in _left_out:
            _left_out.add((name, reasons))
            log.warning("the added node %s is left out of the pool here: %s", name, reasons)
        return None


async def add(
    conn: asyncpg.Connection, node: UpstreamNode, configured: Sequence[UpstreamNode], reason: str, operator: str
) -> None:
    """Add ``node`` to the running pool (a name neither configured nor in the pool); refused when one of its
    secrets is given as a value (it would be stored as one)."""
    given = node.values_given()
    if given:
        raise OperatorRefusal(
            f"{node.name}: {', '.join(given)} given as a value would be stored as one: give each by reference, "
            "the name of an environment variable or a file (docs/operations.md, The pool of nodes)"
        )
    async with conn.transaction():
        changes = await _locked(conn)
        if any(n.name == node.name for n in configured):
            why = "restore it" if node.name in changes.removed else "it is in the pool already"
            raise OperatorRefusal(f"{node.name} is a configured node: {why}, or choose another name")
        if any(n.name == node.name for n in changes.apply(configured)):
            raise OperatorRefusal(f"{node.name} is in the pool already")
        problems = check_pool([*changes.apply(configured), node])
        if problems:
            raise OperatorRefusal("; ".join(problems))
        await conn.execute(
            """INSERT INTO upstream_changes (name, node) VALUES ($1, $2::jsonb)
               ON CONFLICT (name) DO UPDATE SET node = EXCLUDED.node, removed = false, cordoned = NULL,
                   added = nextval(pg_get_serial_sequence('upstream_changes', 'added')), changed_at = now()""",
            node.name,
            node.model_dump_json(),
        )
        detail = {"node": node.name, "tier": node.tier.value, "roles": [r.value for r in node.roles]}
        await record_action(conn, None, "upstream_add", detail, reason, operator)


async def remove(
    conn: asyncpg.Connection, name: str, configured: Sequence[UpstreamNode], reason: str, operator: str
) -> None:
    """Take ``name`` out of the pool (it must leave a node that serves reads)."""
    async with conn.transaction():
        changes = await _locked(conn)
        pool = changes.apply(configured)
        if not any(n.name == name for n in pool):
            raise OperatorRefusal(f"{name} is not in the pool")
        left = [n for n in pool if n.name != name]
        if not any(n.serves(Role.READS) for n in left):
            raise OperatorRefusal(f"{name} is the last node that serves reads")
        await conn.execute(
            """INSERT INTO upstream_changes (name, removed) VALUES ($1, true)
               ON CONFLICT (name) DO UPDATE SET removed = true, node = NULL, cordoned = NULL, changed_at = now()""",
            name,
        )
        await record_action(conn, None, "upstream_remove", {"node": name}, reason, operator)


async def restore(
    conn: asyncpg.Connection, name: str, configured: Sequence[UpstreamNode], reason: str, operator: str
) -> None:
    """Bring a configured node the operator removed back into the pool."""
    async with conn.transaction():
        changes = await _locked(conn)
        if name not in changes.removed or not any(n.name == name for n in configured):
            raise OperatorRefusal(f"{name} is not a configured node that was removed")
        await conn.execute("DELETE FROM upstream_changes WHERE name = $1", name)
        await record_action(conn, None, "upstream_add", {"node": name, "restored": True}, reason, operator)


async def cordon(
    conn: asyncpg.Connection,
    name: str,
    configured: Sequence[UpstreamNode],
    reason: str,
    operator: str,
    *,
    on: bool = True,
) -> None:
    """Cordon ``name`` (it stays in the pool, probed, and serves nothing) or uncordon it."""
    async with conn.transaction():
        changes = await _locked(conn)
        if not any(n.name == name for n in changes.apply(configured)):
            raise OperatorRefusal(f"{name} is not in the pool")
        if on == (name in changes.cordoned):
            raise OperatorRefusal(f"{name} is {'already' if on else 'not'} cordoned")
        await conn.execute(
            """INSERT INTO upstream_changes (name, cordoned) VALUES ($1, $2)
               ON CONFLICT (name) DO UPDATE SET cordoned = EXCLUDED.cordoned, changed_at = now()""",
            name,
            reason if on else None,
        )
        action = "upstream_cordon" if on else "upstream_uncordon"
        await record_action(conn, None, action, {"node": name}, reason, operator)


async def _locked(conn: asyncpg.Connection) -> Changes:
    """The changes, read under a lock that orders every change (two operators at once cannot both add)."""
    await conn.execute("LOCK TABLE upstream_changes IN SHARE ROW EXCLUSIVE MODE")
    return await read_changes(conn)

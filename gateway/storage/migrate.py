"""Versioned schema migrations: ``migrations/NNNN_name.sql`` applied in order, each exactly once.

Each file runs in its own transaction under a PostgreSQL advisory lock, so replicas and a CLI
starting at the same time never apply a migration twice. Applied versions are recorded in
``schema_migrations`` together with a checksum: a file edited after it was applied is an error,
not something silently skipped.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from importlib import resources

import asyncpg

_LOCK_KEY = 0x6761_7465_7761_79  # "gateway"
_NAME = re.compile(r"^(\d{4})_([a-z0-9_]+)\.sql$")


@dataclass(frozen=True)
class Migration:
    version: int
    name: str
    sql: str

    @property
    def checksum(self) -> str:
        return hashlib.sha256(self.sql.encode()).hexdigest()


class MigrationError(Exception):
    """The database's recorded migrations disagree with the files shipped."""


def shipped_migrations() -> list[Migration]:
    found = []
    for entry in resources.files("gateway.storage.migrations").iterdir():
        match = _NAME.match(entry.name)
        if match:
            found.append(Migration(int(match.group(1)), match.group(2), entry.read_text()))
    found.sort(key=lambda m: m.version)
    versions = [m.version for m in found]
    if len(set(versions)) != len(versions):
        raise MigrationError(f"duplicate migration versions: {versions}")
    return found


async def migrate(conn: asyncpg.Connection, migrations: list[Migration] | None = None) -> list[int]:
    """Apply what is missing; return the versions applied now."""
    todo = shipped_migrations() if migrations is None else migrations
    await conn.execute("SELECT pg_advisory_lock($1)", _LOCK_KEY)
    try:
        await conn.execute(
            """CREATE TABLE IF NOT EXISTS schema_migrations (
                   version INTEGER PRIMARY KEY,
                   name TEXT NOT NULL,
                   checksum TEXT NOT NULL,
                   applied_at TIMESTAMPTZ NOT NULL DEFAULT now())"""
        )
        rows = await conn.fetch("SELECT version, checksum FROM schema_migrations")
        applied = {row["version"]: row["checksum"] for row in rows}
        done: list[int] = []
        for migration in todo:
            recorded = applied.get(migration.version)
            if recorded is not None:
                if recorded != migration.checksum:
                    raise MigrationError(
                        f"migration {migration.version:04d}_{migration.name} changed after it was applied"
                    )
                continue
            async with conn.transaction():
                await conn.execute(migration.sql)
                await conn.execute(
                    "INSERT INTO schema_migrations (version, name, checksum) VALUES ($1, $2, $3)",
                    migration.version,
                    migration.name,
                    migration.checksum,
                )
            done.append(migration.version)
        return done
    finally:
        await conn.execute("SELECT pg_advisory_unlock($1)", _LOCK_KEY)


async def pending(conn: asyncpg.Connection) -> list[str]:
    """The shipped migrations not applied yet (``NNNN_name``), read without taking the lock or writing: what a
    serving process checks at start, instead of migrating (``gateway migrate`` applies them, once).
    :class:`MigrationError` when an applied one was changed since."""
    recorded = await conn.fetchval("SELECT to_regclass('schema_migrations') IS NOT NULL")
    rows = await conn.fetch("SELECT version, checksum FROM schema_migrations") if recorded else []
    applied = {row["version"]: row["checksum"] for row in rows}
    missing = []
    for migration in shipped_migrations():
        checksum = applied.get(migration.version)
        if checksum is None:
            missing.append(f"{migration.version:04d}_{migration.name}")
        elif checksum != migration.checksum:
            raise MigrationError(f"migration {migration.version:04d}_{migration.name} changed after it was applied")
    return missing


async def pending_url(dsn: str) -> list[str]:
    conn = await asyncpg.connect(dsn)
    try:
        return await pending(conn)
    finally:
        await conn.close()


async def migrate_url(dsn: str) -> list[int]:
    conn = await asyncpg.connect(dsn)
    try:
        return await migrate(conn)
    finally:
        await conn.close()

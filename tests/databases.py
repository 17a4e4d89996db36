"""A database of a test's own on the session's PostgreSQL server: created, migrated, and dropped."""

from __future__ import annotations

import secrets
from urllib.parse import urlsplit, urlunsplit

import asyncpg

from gateway.storage.migrate import migrate_url


async def fresh_database(dsn: str, prefix: str, *, migrated: bool = True) -> str:
    """A new database named ``<prefix>_<random>`` on the server of ``dsn``, migrated unless asked not; its URL."""
    parts = urlsplit(dsn)
    name = f"{prefix}_{secrets.token_hex(5)}"
    admin = await asyncpg.connect(urlunsplit(parts._replace(path="/postgres")))
    try:
        await admin.execute(f'CREATE DATABASE "{name}"')
    finally:
        await admin.close()
    url = urlunsplit(parts._replace(path=f"/{name}"))
    if migrated:
        await migrate_url(url)
    return url


async def drop_database(url: str) -> None:
    """Drop the database of ``url`` (made by :func:`fresh_database`), whoever is still connected to it."""
    parts = urlsplit(url)
    admin = await asyncpg.connect(urlunsplit(parts._replace(path="/postgres")))
    try:
        await admin.execute(f'DROP DATABASE "{parts.path.lstrip("/")}" WITH (FORCE)')
    finally:
        await admin.close()

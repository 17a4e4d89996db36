"""``gateway upstreams add`` takes a node's secrets by reference (docs/operations.md, The pool of nodes): its
URL holding a key, its headers and its x-token are named on the command line as ``env:NAME`` or
``file:/PATH``, stored in ``upstream_changes`` as those names, and read by whoever builds the node; given
as values (seen by ``ps``, kept in shell history, stored) they are refused and nothing is written. The
command runs in this process (typer's runner) against the CLI tests' real PostgreSQL and the devnode."""

from __future__ import annotations

import asyncio
import json
import logging
import os
from collections.abc import AsyncIterator
from pathlib import Path

import asyncpg
import pytest
from typer.testing import CliRunner

from devnode.node import Devnode
from gateway.cli.main import app
from gateway.upstreams import store
from tests.cli.conftest import Ran

SECRET = "k3y-0f-the-provider"
HEADER_SECRET = "h3ader-secret"
TOKEN_SECRET = "x-t0ken-secret"


@pytest.fixture
async def clean(cli_pool: asyncpg.Pool) -> AsyncIterator[asyncpg.Pool]:
    """No change of the pool before or after (operator_actions is append-only and stays)."""
    await cli_pool.execute("DELETE FROM upstream_changes")
    yield cli_pool
    await cli_pool.execute("DELETE FROM upstream_changes")


async def gateway(cli_env: dict[str, str], env: dict[str, str], *args: str) -> Ran:
    """``gateway <args>`` as an operator runs it, with ``env`` added to the CLI tests' environment."""
    unset: dict[str, str | None] = {k: None for k in os.environ if k.startswith("GATEWAY_") or k == "RAY_ADDRESS"}
    result = await asyncio.to_thread(CliRunner().invoke, app, list(args), env={**unset, **cli_env, **env})
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        raise result.exception
    return Ran(result.exit_code, result.stdout, result.stderr)


async def test_add_stores_the_references_and_the_owner_reads_the_secrets(
    clean: asyncpg.Pool,
    cli_env: dict[str, str],
    devnode: Devnode,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    key_file = tmp_path / "provider-key"
    key_file.write_text(HEADER_SECRET + "\n")
    env = {"IDX_RPC_URL": f"{devnode.rpc_url}/?api-key={SECRET}", "IDX_TOKEN": TOKEN_SECRET}
    since = await clean.fetchval("SELECT coalesce(max(id), 0) FROM operator_actions")
    added = await gateway(
        cli_env,
        env,
        *("upstreams", "add", "idx", "--rpc-url", "env:IDX_RPC_URL", "--grpc-url", "http://127.0.0.1:9"),
        *("--grpc-token", "env:IDX_TOKEN", "--header", f"x-api-key=file:{key_file}", "--role", "heavy"),
        *("--reason", "an indexer"),
    )
    assert added.returncode == 0, added
    row = await clean.fetchval("SELECT node::text FROM upstream_changes WHERE name = 'idx'")
    stored = json.loads(row)
    assert stored["rpc_url"] == {"env": "IDX_RPC_URL"} and stored["grpc_token"] == {"env": "IDX_TOKEN"}
    assert stored["headers"] == {"x-api-key": {"file": str(key_file)}}
    audit = await clean.fetch("SELECT detail::text AS d FROM operator_actions WHERE id > $1", since)
    for secret in (SECRET, HEADER_SECRET, TOKEN_SECRET):
        assert secret not in row and secret not in str([r["d"] for r in audit])
    # the pool's owner reads the row in its own environment: the secrets, not their names
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    (node,) = (await store.read_changes(clean)).added
    assert (node.rpc_url, node.grpc_token, node.headers) == (
        env["IDX_RPC_URL"],
        TOKEN_SECRET,
        {"x-api-key": HEADER_SECRET},
    )
    monkeypatch.delenv("IDX_TOKEN")  # where it cannot be read, the node is left out and the rest applies
    with caplog.at_level(logging.WARNING, logger="gateway.upstreams.store"):
        assert (await store.read_changes(clean)).added == ()
        assert (await store.read_changes(clean)).added == ()  # the owner reads twice a second: logged once
    (line,) = [r.getMessage() for r in caplog.records if r.name == "gateway.upstreams.store"]
    assert "idx is left out" in line and "IDX_TOKEN is not set" in line and SECRET not in line


@pytest.mark.parametrize(
    ("options", "why"),
    [
        (("--rpc-url", f"http://127.0.0.1:8899/?api-key={SECRET}"), "may hold a key"),
        (("--rpc-url", f"https://{SECRET}@node.example"), "may hold a key"),
        (("--rpc-url", "http://127.0.0.1:8899", "--ws-url", f"ws://127.0.0.1:8900/{SECRET}"), "may hold a key"),
        (
            ("--rpc-url", "http://127.0.0.1:8899", "--grpc-url", "http://h:1", "--grpc-token", SECRET),
            "never the secret",
        ),
        (("--rpc-url", "http://127.0.0.1:8899", "--header", f"x-api-key:{SECRET}"), "NAME=env:VARIABLE"),
        (("--rpc-url", "http://127.0.0.1:8899", "--header", f"x-api-key={SECRET}"), "never the secret"),
        (("--rpc-url", "http://127.0.0.1:8899", "--header", "x-api-key=env:NOT_SET_HERE"), "NOT_SET_HERE is not set"),
    ],
)
async def test_add_refuses_a_secret_given_as_a_value_and_writes_nothing(
    clean: asyncpg.Pool, cli_env: dict[str, str], options: tuple[str, ...], why: str
) -> None:
    since = await clean.fetchval("SELECT coalesce(max(id), 0) FROM operator_actions")
    refused = await gateway(cli_env, {}, "upstreams", "add", "leaky", *options, "--reason", "x")
    assert refused.returncode != 0, refused
    said = refused.stdout + refused.stderr
    assert why in said and SECRET not in said, said
    assert await clean.fetchval("SELECT count(*) FROM upstream_changes") == 0
    assert await clean.fetchval("SELECT count(*) FROM operator_actions WHERE id > $1", since) == 0

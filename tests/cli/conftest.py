"""Fixtures of the operator CLI's tests: a database of their own on the session's real PostgreSQL (so the
audit sees only these tests' accounts), and the ``gateway`` command run against it: in this process
with typer's runner (a thread of its own, as each command runs its own event loop), or as the real
console script in a subprocess (a second each, for the few tests that want the installed script)."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path

import asyncpg
import pytest
from typer.testing import CliRunner

from gateway.cli.main import app
from tests.databases import fresh_database

GATEWAY = str(Path(sys.executable).with_name("gateway"))


@dataclass(frozen=True)
class Ran:
    returncode: int
    stdout: str
    stderr: str


Run = Callable[..., Awaitable[Ran]]


@pytest.fixture(scope="session")
async def cli_database_url(database_url: str) -> str:
    return await fresh_database(database_url, "cli")


@pytest.fixture(scope="session")
async def cli_pool(cli_database_url: str) -> AsyncIterator[asyncpg.Pool]:
    p = await asyncpg.create_pool(cli_database_url, min_size=1, max_size=4)
    yield p
    await p.close()


@pytest.fixture(scope="session")
def cli_env(cli_database_url: str, redis_url: str, tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """The environment of ``gateway`` run as an operator runs it, with this session's stores; no Ray, no node."""
    return {
        "GATEWAY_HOME": str(tmp_path_factory.mktemp("cli-home")),
        "GATEWAY_DATABASE_URL": cli_database_url,
        "GATEWAY_REDIS_URL": redis_url,
        "GATEWAY_UPSTREAM_RPC_URL": "http://127.0.0.1:9",  # discard: nothing answers
        "USER": "tester",
        "COLUMNS": "250",
    }


@pytest.fixture(scope="session")
def gateway_cli(cli_env: dict[str, str]) -> Run:
    """``gateway <args>`` in this process (typer's runner, in a thread); returns code, stdout, stderr."""
    runner = CliRunner()
    unset: dict[str, str | None] = {k: None for k in os.environ if k.startswith("GATEWAY_") or k == "RAY_ADDRESS"}

    async def run(*args: str) -> Ran:
        result = await asyncio.to_thread(runner.invoke, app, list(args), env={**unset, **cli_env})
        if result.exception is not None and not isinstance(result.exception, SystemExit):
            raise result.exception
        return Ran(result.exit_code, result.stdout, result.stderr)

    return run


@pytest.fixture(scope="session")
def gateway_script(cli_env: dict[str, str]) -> Run:
    """``gateway <args>``: the installed console script in a subprocess."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("GATEWAY_") and k != "RAY_ADDRESS"} | cli_env

    async def run(*args: str) -> Ran:
        done = await asyncio.to_thread(
            subprocess.run, [GATEWAY, *args], env=env, capture_output=True, text=True, timeout=60
        )
        return Ran(done.returncode, done.stdout, done.stderr)

    return run

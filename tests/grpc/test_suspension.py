"""``gateway account suspend`` reaches open gRPC streams: every stream of the account ends within seconds with
``PERMISSION_DENIED`` "ACCOUNT_SUSPENDED: ...", a new one is refused so (charged nothing), another account's
stream goes on, and ``gateway account resume`` lets the account stream again. The operator's command as run
(typer's runner) on the same PostgreSQL and Redis; real grpcio client, the server in this process."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

import asyncpg
import grpc
from typer.testing import CliRunner

from gateway.cli.main import app as cli_app
from tests.grpc.client import Subscription, kind
from tests.grpc.conftest import GeyserClient, RunningStream


def operator(env: dict[str, str], *args: str) -> None:
    """``gateway <args>`` as an operator runs it (the command runs its own event loop)."""
    unset: dict[str, str | None] = {k: None for k in os.environ if k.startswith("GATEWAY_")}
    result = CliRunner().invoke(cli_app, list(args), env={**unset, **env})
    assert result.exit_code == 0, (result.stdout, result.exception)


async def slots(geyser: GeyserClient, sub: Subscription) -> None:
    await sub.send(slots={"s": geyser.pb2.SubscribeRequestFilterSlots()})
    await sub.until(lambda u: kind(u) == "slot")


async def test_suspend_ends_the_accounts_streams_permission_denied_and_resume_restores(
    geyser: GeyserClient,
    stream: RunningStream,
    db: asyncpg.Connection,
    database_url: str,
    redis_url: str,
    tmp_path: Path,
) -> None:
    env = {"GATEWAY_HOME": str(tmp_path / "cli"), "GATEWAY_DATABASE_URL": database_url, "GATEWAY_REDIS_URL": redis_url}
    pubkey, key = await stream.customer(db, 1_000)
    _, other_key = await stream.customer(db, 1_000)
    sessions = stream.server.auth.sessions
    assert sessions is not None
    token = await sessions.issue_token(pubkey)
    async with grpc.aio.insecure_channel(stream.address) as channel:
        by_key, by_session = Subscription(geyser, channel, key), Subscription(geyser, channel, token)
        other = Subscription(geyser, channel, other_key)
        for sub in (by_key, by_session, other):
            await slots(geyser, sub)

        await asyncio.to_thread(operator, env, "account", "suspend", pubkey, "--reason", "abuse", "--operator", "t")
        for sub in (by_key, by_session):
            error = await sub.error()  # within WAIT_S, well before a 60 s interval would have ended it
            assert error.code() == grpc.StatusCode.PERMISSION_DENIED, error
            assert "ACCOUNT_SUSPENDED" in (error.details() or ""), error
        await other.until(lambda u: kind(u) == "slot")  # another account's stream goes on

        remaining = stream.server.meter.remaining(pubkey)
        again = Subscription(geyser, channel, key)
        await again.send(slots={"s": geyser.pb2.SubscribeRequestFilterSlots()})
        error = await again.error()
        assert error.code() == grpc.StatusCode.PERMISSION_DENIED and "ACCOUNT_SUSPENDED" in (error.details() or "")
        assert stream.server.meter.remaining(pubkey) == remaining

        await asyncio.to_thread(operator, env, "account", "resume", pubkey, "--reason", "ok", "--operator", "t")
        resumed = Subscription(geyser, channel, key)
        await slots(geyser, resumed)

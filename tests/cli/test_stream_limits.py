"""``gateway account limits --streams --stream-opens --address-streams``: an operator raises one account's gRPC
stream limits for a heavy consumer, and two running gRPC server processes hold it to the new limits at its next
stream open, the other accounts to the settings'. Real CLI (typer's runner), PostgreSQL and Redis, the gRPC
stream servers in this process in front of the session's devnode, a real grpcio client."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from pathlib import Path

import asyncpg
import grpc
import pytest

from devnode.node import Devnode
from gateway.grpc.server import GrpcStreamServer
from tests.cli.conftest import Run
from tests.credits.helpers import fund, new_pubkey
from tests.grpc.client import Subscription, eventually
from tests.grpc.conftest import GeyserClient, RunningStream, generate_client, stream_settings

DEFAULTS = {"grpc_max_streams_per_account": 1, "grpc_max_streams_per_address": 1, "grpc_max_stream_opens_per_minute": 2}


@pytest.fixture(scope="module")
def geyser(tmp_path_factory: pytest.TempPathFactory) -> GeyserClient:
    return generate_client(tmp_path_factory.mktemp("geyser-client"))


@asynccontextmanager
async def two_servers(
    tmp_path: Path, database_url: str, redis_url: str, devnode: Devnode
) -> AsyncIterator[list[RunningStream]]:
    """Two gRPC server processes' servers on the CLI's database, with tight default stream limits."""
    async with AsyncExitStack() as stack:
        running = []
        for _ in range(2):
            settings = stream_settings(
                tmp_path, database_url, redis_url, devnode, **DEFAULTS
            )  # one home: one key secret
            server = GrpcStreamServer(settings, port=0)
            stack.push_async_callback(server.stop)
            await server.start()
            running.append(RunningStream(server, f"127.0.0.1:{server.port}"))
        yield running


async def refusal(sub: Subscription) -> str:
    error = await sub.error()
    assert error.code() == grpc.StatusCode.RESOURCE_EXHAUSTED, error
    return error.details() or ""


async def test_an_operator_raises_an_accounts_stream_limits_and_every_server_holds_it_to_them(
    geyser: GeyserClient,
    gateway_cli: Run,
    cli_pool: asyncpg.Pool,
    cli_database_url: str,
    redis_url: str,
    devnode: Devnode,
    tmp_path: Path,
) -> None:
    async with two_servers(tmp_path, cli_database_url, redis_url, devnode) as (first, second):
        async with cli_pool.acquire() as db:
            heavy, heavy_key = await first.customer(db, 10_000)
            _, other_key = await first.customer(db, 10_000)
        async with (
            grpc.aio.insecure_channel(first.address) as one,
            grpc.aio.insecure_channel(second.address) as two,
        ):

            async def live(channel: grpc.aio.Channel, key: str) -> Subscription:
                sub = Subscription(geyser, channel, key)
                await sub.send(slots={"s": geyser.pb2.SubscribeRequestFilterSlots()})
                await sub.ping()
                return sub

            held = [await live(one, heavy_key)]  # the defaults: one stream open, then refused
            assert "per account (1/1)" in await refusal(Subscription(geyser, two, heavy_key))

            raised = await gateway_cli(
                "account",
                "limits",
                heavy,
                "--streams",
                "4",
                "--stream-opens",
                "20",
                "--address-streams",
                "4",
                "--reason",
                "heavy consumer, ticket 12",
                "--operator",
                "carol",
            )
            assert raised.returncode == 0, raised.stderr
            assert "gRPC streams 4 (override) open, 20 (override) opens a minute" in raised.stdout
            assert "4 (override) from one address" in raised.stdout
            assert "every gRPC server at its next stream open" in raised.stdout

            held += [await live(channel, heavy_key) for channel in (two, one, two)]  # 4, over both servers
            for channel in (one, two):
                assert "per account (4/4)" in await refusal(Subscription(geyser, channel, heavy_key))
            # another account from the same address keeps the default address cap (1, taken 4 times over)
            assert "from this address (1/1)" in await refusal(Subscription(geyser, one, other_key))

            shown = json.loads((await gateway_cli("account", "limits", heavy, "--json")).stdout)
            assert shown["grpc_max_streams"] == 4 and shown["grpc_max_streams_source"] == "override"
            assert shown["grpc_max_opens_per_minute"] == 20 and shown["grpc_max_streams_per_address"] == 4
            assert shown["rate_source"] == "default"
            action = await cli_pool.fetchrow(
                "SELECT detail::text AS detail, reason, operator FROM operator_actions "
                "WHERE pubkey = $1 AND action = 'limits' ORDER BY id DESC LIMIT 1",
                heavy,
            )
            assert (action["reason"], action["operator"]) == ("heavy consumer, ticket 12", "carol")
            detail = json.loads(action["detail"])
            assert detail["before"]["grpc_max_streams"] is None
            assert detail["after"] == {
                "rate_limit_rps": None,
                "concurrency_limit": None,
                "grpc_max_streams": 4,
                "grpc_max_opens_per_minute": 20,
                "grpc_max_streams_per_address": 4,
            }

            # back to the defaults: the streams open stay open, the next open is held to the defaults again
            reset = await gateway_cli("account", "limits", heavy, "--reset", "--reason", "plan ended")
            assert reset.returncode == 0, reset.stderr
            assert "now none" in reset.stdout
            held[0].call.cancel()
            await eventually(lambda: len(first.server.fanout.members) == 1, "the cancel seen")
            details = await refusal(Subscription(geyser, one, heavy_key))
            assert "stream open rate exceeded" in details and "at most 2 a minute" in details
            for sub in held[1:]:
                await sub.ping()  # still served


async def test_stream_limit_options_are_checked(cli_pool: asyncpg.Pool, gateway_cli: Run) -> None:
    pubkey = new_pubkey()
    await fund(cli_pool, pubkey, 100)
    zero = await gateway_cli("account", "limits", pubkey, "--stream-opens", "0", "--reason", "x")
    assert zero.returncode == 1 and "--stream-opens must be a positive integer, not 0" in zero.stderr
    both = await gateway_cli("account", "limits", pubkey, "--reset", "--streams", "3", "--reason", "x")
    assert both.returncode == 2
    assert (await gateway_cli("account", "limits", pubkey, "--streams", "3")).returncode == 1  # no reason
    shown = await gateway_cli("account", "limits", pubkey)
    assert "gRPC streams 10 (default) open, 30 (default) opens a minute, 40 (default) from one address" in shown.stdout
    count = await cli_pool.fetchval("SELECT count(*) FROM operator_actions WHERE pubkey = $1", pubkey)
    assert count == 0

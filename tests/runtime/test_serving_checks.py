"""What a serving process of the Serve app refuses to start without (gateway/runtime/serving.py), each named,
and the schema check it makes instead of migrating: on a real PostgreSQL database, empty, half and fully migrated."""

from __future__ import annotations

import secrets
from pathlib import Path
from typing import Any

import asyncpg
import pytest

from gateway.app.settings import Settings
from gateway.auth.key_secret import SECRET_FILE
from gateway.core.errors import ConfigError
from gateway.runtime.serving import missing_settings, refuse_unless_ready
from gateway.storage.migrate import migrate, pending, shipped_migrations
from tests.databases import drop_database, fresh_database
from tests.support import service_key_settings

EDGE = {"GATEWAY_EDGE_SECRET": "ab" * 16}


def complete(home: Path, **extra: Any) -> Settings:
    """Settings a serve-deployed process is given: everything ``gateway up`` would fill in."""
    return Settings(
        **service_key_settings(home),
        home=home,
        api_key_secret="cd" * 32,
        database_url="postgresql://gateway@db.internal/gateway",
        redis_url="redis://redis.internal:6379/0",
        upstream_rpc_url="https://node.internal",
        public_url="https://rpc.example.com",
        **extra,
    )


def test_a_complete_configuration_lacks_nothing(tmp_path: Path) -> None:
    assert missing_settings(complete(tmp_path), EDGE) == []
    assert missing_settings(complete(tmp_path, host="0.0.0.0"), EDGE) == []


@pytest.mark.parametrize(
    ("cleared", "named"),
    [
        ({"deposit_address": None}, "GATEWAY_DEPOSIT_ADDRESS"),
        ({"fee_payer_address": None}, "GATEWAY_FEE_PAYER_ADDRESS"),
        ({"api_key_secret": None}, "GATEWAY_API_KEY_SECRET"),
        ({"database_url": None}, "GATEWAY_DATABASE_URL"),
        ({"redis_url": None}, "GATEWAY_REDIS_URL"),
        ({"upstream_rpc_url": None}, "GATEWAY_UPSTREAM_RPC_URL"),
    ],
)
def test_each_missing_setting_is_named(tmp_path: Path, cleared: dict[str, object], named: str) -> None:
    settings = complete(tmp_path).model_copy(update=cleared)
    (missing,) = missing_settings(settings, EDGE)
    assert named in missing


def test_the_fee_payer_is_needed_only_to_settle_x402(tmp_path: Path) -> None:
    settings = complete(tmp_path, x402_settle=False).model_copy(update={"fee_payer_address": None})
    assert missing_settings(settings, EDGE) == []


def test_the_api_key_secret_may_be_a_file_never_made_here(tmp_path: Path) -> None:
    settings = complete(tmp_path).model_copy(update={"api_key_secret": None})
    assert missing_settings(settings, EDGE)
    assert not (tmp_path / SECRET_FILE).exists()  # checking made no secret
    (tmp_path / SECRET_FILE).parent.mkdir(parents=True, exist_ok=True)  # the keys' dir
    (tmp_path / SECRET_FILE).write_bytes(secrets.token_bytes(32))  # a mounted Secret
    assert missing_settings(settings, EDGE) == []


def test_a_routable_host_behind_haproxy_needs_the_edge_secret_in_the_nodes_environment(tmp_path: Path) -> None:
    (missing,) = missing_settings(complete(tmp_path, host="0.0.0.0"), {})
    assert "GATEWAY_EDGE_SECRET" in missing
    assert missing_settings(complete(tmp_path), {}) == []  # loopback: one machine


def test_the_plaintext_grpc_stream_on_a_routable_host_is_refused(tmp_path: Path) -> None:
    settings = complete(tmp_path, host="0.0.0.0", upstream_grpc_url="http://node.internal:10000")
    (missing,) = missing_settings(settings, EDGE)
    assert "GRPC_TLS_CERT" in missing
    assert missing_settings(settings.model_copy(update={"grpc_servers": 0}), EDGE) == []


async def test_pending_migrations_are_named_and_refused_never_applied(database_url: str, tmp_path: Path) -> None:
    url = await fresh_database(database_url, "pending", migrated=False)
    shipped = shipped_migrations()
    everything = [f"{m.version:04d}_{m.name}" for m in shipped]
    settings = complete(tmp_path).model_copy(update={"database_url": url})
    conn = await asyncpg.connect(url)
    try:
        assert await pending(conn) == everything  # not even schema_migrations yet
        with pytest.raises(ConfigError, match=f"migrations pending \\({everything[0]}, .*gateway migrate"):
            await refuse_unless_ready(settings, EDGE)
        assert await pending(conn) == everything  # the check migrated nothing
        await migrate(conn, shipped[:-1])
        assert await pending(conn) == everything[-1:]
        with pytest.raises(ConfigError, match=f"migrations pending \\({everything[-1]}\\)"):
            await refuse_unless_ready(settings, EDGE)
        await migrate(conn)
        assert await pending(conn) == []
        await refuse_unless_ready(settings, EDGE)  # current: serves
    finally:
        await conn.close()
        await drop_database(url)

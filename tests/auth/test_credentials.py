"""Credential extraction per transport (pure), the client helper, and small store behaviours."""

from __future__ import annotations

import os
import stat
import time
from pathlib import Path

import pytest
import redis.asyncio as aioredis
from hypothesis import given
from hypothesis import strategies as st
from solders.keypair import Keypair

from gateway.auth.api_keys import generate_api_key, hash_api_key, is_api_key_format
from gateway.auth.cache import TtlCache
from gateway.auth.key_secret import load_or_create_secret
from gateway.auth.payment_terms import SOLANA_DEVNET, SOLANA_MAINNET, caip2_network
from gateway.auth.store.nonces import Claim, NonceStore
from gateway.auth.store.sessions import SessionStore
from gateway.core.credentials import (
    Credentials,
    bearer_token,
    grpc_credentials,
    http_credentials,
    websocket_credentials,
)
from gateway.storage.errors import StoreUnavailable
from gateway_client import WalletSigner


def test_http_header_key_before_query_key() -> None:
    creds = http_credentials({"x-api-key": "h"}, {"api-key": "q"})
    assert creds.api_key == "h"
    assert http_credentials({}, {"api-key": "q"}).api_key == "q"


def test_http_collects_every_kind() -> None:
    creds = http_credentials({"x-pubkey": "p", "x-nonce": "n", "authorization": "Bearer t", "other": "x"}, {})
    assert creds.wallet == {"x-pubkey": "p", "x-nonce": "n"}
    assert creds.authorization == "Bearer t"
    assert http_credentials({}, {}).empty
    assert not http_credentials({"x-api-key": ""}, {}).empty  # present-but-empty is a bad credential, not none


def test_bearer_parsing() -> None:
    assert bearer_token("Bearer abc") == "abc"
    assert bearer_token("bearer   abc ") == "abc"
    assert bearer_token("Bearer") is None
    assert bearer_token("Basic abc") is None


def test_websocket_subprotocol_key_and_echo() -> None:
    ws = websocket_credentials({"sec-websocket-protocol": "auth.srpc_live_k, solana-rpc"})
    assert ws.credentials.api_key == "srpc_live_k"
    assert ws.subprotocol == "solana-rpc"
    order = websocket_credentials({"sec-websocket-protocol": "solana-rpc,auth.key"})
    assert (order.credentials.api_key, order.subprotocol) == ("key", "solana-rpc")


def test_websocket_never_echoes_the_key_entry() -> None:
    ws = websocket_credentials({"sec-websocket-protocol": "auth.secret"})
    assert ws.credentials.api_key == "secret" and ws.subprotocol is None


def test_websocket_header_key_and_bearer() -> None:
    ws = websocket_credentials({"x-api-key": "h", "sec-websocket-protocol": "auth.p, solana-rpc"})
    assert ws.credentials.api_key == "h"
    bearer = websocket_credentials({"authorization": "Bearer tok", "sec-websocket-protocol": "solana-rpc"})
    assert bearer.credentials.authorization == "Bearer tok" and bearer.subprotocol == "solana-rpc"
    assert websocket_credentials({}, {"api-key": "q"}).credentials.api_key == "q"
    assert websocket_credentials({}).credentials.empty


def test_grpc_metadata_forms() -> None:
    assert grpc_credentials({"x-token": "t"}) == Credentials(token="t")
    assert grpc_credentials([("X-Token", b"t2"), ("other", "v")]) == Credentials(token="t2")
    assert grpc_credentials([("user-agent", "grpc")]).empty


@given(st.dictionaries(st.text(max_size=20), st.text(max_size=80)), st.dictionaries(st.text(max_size=10), st.text()))
def test_extractors_never_raise(headers: dict[str, str], query: dict[str, str]) -> None:
    lowered = {k.lower(): v for k, v in headers.items()}
    http_credentials(lowered, query)
    websocket_credentials(lowered, query)
    grpc_credentials(lowered)


def test_key_format_and_hash() -> None:
    key = generate_api_key()
    assert is_api_key_format(key) and key.startswith("srpc_live_") and len(key) == 53
    assert is_api_key_format("ab" * 32) and not is_api_key_format("ab" * 31)
    assert not is_api_key_format(key + "\n")
    assert hash_api_key(b"s" * 32, key) != hash_api_key(b"t" * 32, key)


def test_signer_accepts_seed_or_expanded_key() -> None:
    keypair = Keypair()
    expanded = bytes(keypair)
    assert WalletSigner(expanded).pubkey == WalletSigner(expanded[:32]).pubkey == str(keypair.pubkey())
    with pytest.raises(ValueError, match="does not match"):
        WalletSigner(expanded[:32] + bytes(Keypair().pubkey()))
    with pytest.raises(ValueError, match="32-byte seed"):
        WalletSigner(b"x" * 48)


def test_signer_headers_are_complete() -> None:
    headers = WalletSigner(bytes(32)).headers("post", "/x?y=1", "{}", timestamp=5, nonce="n")
    assert headers["X-Timestamp"] == "5" and headers["X-Nonce"] == "n"
    assert set(headers) == {"X-Pubkey", "X-Signature", "X-Timestamp", "X-Nonce"}


def test_ttl_cache_expires_and_bounds() -> None:
    now = [0.0]
    cache: TtlCache[str, int | None] = TtlCache(max_entries=2, clock=lambda: now[0])
    cache.put("a", 1, 10)
    cache.put("none", None, 1)
    assert cache.get("none") == (True, None)
    now[0] = 2
    assert cache.get("none") == (False, None)
    cache.put("b", 2, 10)
    cache.put("c", 3, 10)
    assert len(cache) == 2 and cache.get("a") == (False, None)


def test_secret_file_is_created_once_private(tmp_path: Path) -> None:
    path = tmp_path / "keys" / "api-key-secret"
    first = load_or_create_secret(path)
    assert len(first) == 32 and load_or_create_secret(path) == first
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert [p.name for p in path.parent.iterdir()] == ["api-key-secret"]
    path.write_bytes(b"short")
    with pytest.raises(ValueError):
        load_or_create_secret(path)


def test_caip2_names() -> None:
    assert caip2_network("solana-mainnet") == SOLANA_MAINNET
    assert caip2_network("devnet") == SOLANA_DEVNET
    assert caip2_network("solana:abc") == "solana:abc"


async def test_stores_fail_closed_without_redis(tmp_path: Path) -> None:
    """A Redis that cannot be reached is StoreUnavailable (the boundary's 503), never an unrecorded
    nonce or an unchecked token."""
    down = aioredis.Redis.from_url(f"unix://{tmp_path}/absent.sock", socket_timeout=0.5)
    try:
        with pytest.raises(StoreUnavailable, match="the nonce store"):
            await NonceStore(down).claim("pk", "n", int(time.time()))
        with pytest.raises(StoreUnavailable, match="the session store"):
            await SessionStore(down).resolve(os.urandom(32).hex())
    finally:
        await down.aclose()


async def test_nonce_store_sets_a_bounded_expiry(redis_client: aioredis.Redis) -> None:
    store = NonceStore(redis_client)
    nonce = os.urandom(8).hex()
    now = int(time.time())
    assert await store.claim("pk-ttl", nonce, now) is Claim.ACCEPTED
    assert await store.claim("pk-ttl", nonce, now) is Claim.REPLAYED
    ttl = await redis_client.ttl(f"nonce:pk-ttl:{nonce}")
    assert 120 < ttl <= 180

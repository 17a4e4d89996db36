"""The gRPC port with TLS (a certificate and key configured), and the actor that serves it under
``gateway up``, run here without Ray: it answers over TLS with a self-signed certificate the client trusts."""

from __future__ import annotations

import asyncio
import ipaddress
from pathlib import Path

import asyncpg
import grpc
import pytest
from cryptography import x509

from tests.certs import self_signed_pem
from tests.grpc.client import Subscription, kind
from tests.grpc.conftest import GeyserClient, StreamFactory


def self_signed(directory: Path) -> tuple[Path, Path]:
    """A self-signed certificate for localhost and 127.0.0.1, and its key, as PEM files."""
    names = [x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]
    certificate, key = self_signed_pem("localhost", names, days=30)
    cert_path, key_path = directory / "grpc.crt", directory / "grpc.key"
    cert_path.write_bytes(certificate)
    key_path.write_bytes(key)
    return cert_path, key_path


async def test_tls_with_a_configured_certificate(
    geyser: GeyserClient, serve_stream: StreamFactory, db: asyncpg.Connection, tmp_path: Path
) -> None:
    cert, key_file = self_signed(tmp_path)
    async with serve_stream(grpc_tls_cert=cert, grpc_tls_key=key_file) as stream:
        assert stream.server.status()["tls"] is True
        _, key = await stream.customer(db, 10_000)
        credentials = grpc.ssl_channel_credentials(root_certificates=cert.read_bytes())
        options = [("grpc.ssl_target_name_override", "localhost")]
        async with grpc.aio.secure_channel(stream.address, credentials, options=options) as channel:
            stub = geyser.grpc.GeyserStub(channel)
            slot = await stub.GetSlot(geyser.pb2.GetSlotRequest(), metadata=(("x-token", key),))
            assert slot.slot > 0
            sub = Subscription(geyser, channel, key)
            await sub.send(slots={"s": geyser.pb2.SubscribeRequestFilterSlots()})
            assert kind(await sub.until(lambda u: kind(u) == "slot")) == "slot"
        async with grpc.aio.insecure_channel(stream.address) as plaintext:  # TLS only on that port
            with pytest.raises(grpc.aio.AioRpcError) as refused:
                await geyser.grpc.GeyserStub(plaintext).GetSlot(
                    geyser.pb2.GetSlotRequest(), metadata=(("x-token", key),), timeout=5
                )
            assert refused.value.code() == grpc.StatusCode.UNAVAILABLE


def test_certificate_and_key_go_together(tmp_path: Path) -> None:
    from gateway.app.settings import load_settings
    from gateway.base.config import ConfigError

    cert, _ = self_signed(tmp_path)
    with pytest.raises(ConfigError, match="grpc_tls_cert and grpc_tls_key go together"):
        load_settings(grpc_tls_cert=cert)


async def test_the_actor_serves_tls_on_its_own_loop_and_stops(
    geyser: GeyserClient, serve_stream: StreamFactory, db: asyncpg.Connection, tmp_path: Path
) -> None:
    from gateway.grpc.stream_actor import GrpcStreamActor
    from gateway.runtime.ports import free_port

    cert, key_file = self_signed(tmp_path)
    async with serve_stream() as stream:  # for its settings and a customer; the actor serves on its own port
        _, key = await stream.customer(db, 10_000)
        port = free_port()
        settings = stream.server.settings.model_copy(
            update={"grpc_port": port, "grpc_tls_cert": cert, "grpc_tls_key": key_file}
        )
        actor = GrpcStreamActor(settings.model_dump(mode="json"), "grpc-stream-test")
        try:
            status = await asyncio.to_thread(actor.wait_ready, 30)
            assert (status["port"], status["tls"], status["running"]) == (port, True, True)

            def get_slot() -> int:
                credentials = grpc.ssl_channel_credentials(root_certificates=cert.read_bytes())
                options = [("grpc.ssl_target_name_override", "localhost")]
                with grpc.secure_channel(f"127.0.0.1:{port}", credentials, options=options) as channel:
                    stub = geyser.grpc.GeyserStub(channel)
                    return int(stub.GetSlot(geyser.pb2.GetSlotRequest(), metadata=(("x-token", key),), timeout=10).slot)

            assert await asyncio.to_thread(get_slot) > 0
        finally:
            await asyncio.to_thread(actor.shutdown, 10)
        assert actor.status()["running"] is False

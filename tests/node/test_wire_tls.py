"""The node client over TLS with a real certificate chain, as docs/configuration.md's production example
(``GATEWAY_UPSTREAM_RPC_URL=https://your-node.example:8899``) connects.

The test makes a CA and a certificate it signed for ``localhost`` (cryptography), serves HTTPS with it on
127.0.0.1 (an asyncio server: no real node serves a certificate this test can make) and points the
client at the CA both ways the docs say: the ``upstream_ca_file`` setting (the node client alone trusts
it; the webhook dispatcher's real connector does not) and OpenSSL's ``SSL_CERT_FILE`` (the whole process).
"""

from __future__ import annotations

import asyncio
import datetime
import ipaddress
import ssl
from pathlib import Path

import aiohttp
import grpc
import orjson
import pytest
import uvloop
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID
from websockets.asyncio.server import ServerConnection, serve

from gateway.app.settings import load_settings
from gateway.base.config import ConfigError
from gateway.core.upstreams import UpstreamNode
from gateway.node.geyser import UpstreamGeyser, root_certificates
from gateway.node.http import HttpUpstream, UpstreamUnavailable
from gateway.node.pubsub import UpstreamPubSub
from gateway.node.streams import OneStreamNode
from gateway.webhooks import targets
from geyser_proto.fanout import Fanout

ANSWER = b'{"jsonrpc":"2.0","id":1,"result":123}'


def issue(tmp: Path, name: str) -> tuple[Path, Path, Path]:
    """(CA certificate, server certificate chain, server key) files, the server's for localhost and 127.0.0.1."""
    now = datetime.datetime.now(datetime.UTC)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, f"{name} test CA")])
    ca = (
        x509.CertificateBuilder()
        .subject_name(ca_name)
        .issuer_name(ca_name)
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(
            x509.KeyUsage(False, False, False, False, False, True, True, False, False), critical=True
        )  # keyCertSign, cRLSign
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(ca_key.public_key()), critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    key = ec.generate_private_key(ec.SECP256R1())
    cert = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "localhost")]))
        .issuer_name(ca_name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(
            x509.SubjectAlternativeName([x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
            critical=False,
        )
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.ExtendedKeyUsage([x509.oid.ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()), critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    paths = tmp / f"{name}-ca.pem", tmp / f"{name}-cert.pem", tmp / f"{name}-key.pem"
    paths[0].write_bytes(ca.public_bytes(serialization.Encoding.PEM))
    paths[1].write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    paths[2].write_bytes(
        key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    )
    return paths


async def tls_server(cert: Path, key: Path, requests: list[bytes]) -> asyncio.Server:
    """HTTPS on 127.0.0.1 with ``cert``, answering every request with ``ANSWER``."""
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(cert, key)

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                length = int(head.lower().partition(b"content-length: ")[2].partition(b"\r\n")[0] or 0)
                requests.append(head + await reader.readexactly(length))
                writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n%s" % (len(ANSWER), ANSWER))
        except (asyncio.IncompleteReadError, ConnectionError, ssl.SSLError):
            pass
        finally:
            writer.close()

    return await asyncio.start_server(serve, "127.0.0.1", 0, ssl=context)


async def call_over_tls(cert: Path, key: Path, ca_file: Path | None = None) -> bytes:
    """One ``post`` to ``https://localhost:<port>`` served with ``cert``, ``ca_file`` given to the client."""
    requests: list[bytes] = []
    server = await tls_server(cert, key, requests)
    port = server.sockets[0].getsockname()[1]
    upstream = HttpUpstream(f"https://localhost:{port}", ca_file=None if ca_file is None else str(ca_file))
    try:
        first = await upstream.post(b'{"jsonrpc":"2.0","id":1,"method":"getSlot"}', 5.0)
        second = await upstream.post(b'{"jsonrpc":"2.0","id":1,"method":"getSlot"}', 5.0)
        assert first == second
        assert upstream.open_connections == 1  # kept alive over TLS
        assert requests[0].startswith(b"POST / HTTP/1.1\r\nHost: localhost:%d\r\n" % port)
        return first
    finally:
        await upstream.close()
        server.close()


@pytest.mark.parametrize("run", [asyncio.run, uvloop.run], ids=["asyncio", "uvloop"])
def test_a_node_whose_ca_is_trusted_through_ssl_cert_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, run: object
) -> None:
    ca, cert, key = issue(tmp_path, "node")
    monkeypatch.setenv("SSL_CERT_FILE", str(ca))
    assert run(call_over_tls(cert, key)) == ANSWER  # type: ignore[operator]


def test_a_certificate_no_trusted_ca_signed_is_refused_before_anything_is_sent(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ca, _, _ = issue(tmp_path, "trusted")
    _, cert, key = issue(tmp_path, "other")
    monkeypatch.setenv("SSL_CERT_FILE", str(ca))
    with pytest.raises(UpstreamUnavailable) as refused:
        uvloop.run(call_over_tls(cert, key))
    assert refused.value.sent is False
    assert str(refused.value) == "could not connect to the node"


@pytest.mark.parametrize("run", [asyncio.run, uvloop.run], ids=["asyncio", "uvloop"])
def test_a_node_whose_ca_is_trusted_through_upstream_ca_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, run: object
) -> None:
    ca, cert, key = issue(tmp_path, "node")
    monkeypatch.delenv("SSL_CERT_FILE", raising=False)
    assert run(call_over_tls(cert, key, ca_file=ca)) == ANSWER  # type: ignore[operator]


async def webhook_post(url: str) -> int:
    """A post through the webhook dispatcher's own connector (a public receiver's client)."""
    async with aiohttp.ClientSession(connector=targets.connector(1, True)) as http, http.post(url, data=b"{}") as resp:
        return resp.status


def test_the_ca_file_adds_to_the_system_cas_for_the_node_client_alone(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``public`` stands in for the system's roots (through SSL_CERT_FILE, as no public CA signs here): the
    node client with ``upstream_ca_file`` trusts both; a webhook post still refuses the node's private CA."""
    node_ca, node_cert, node_key = issue(tmp_path, "node")
    public_ca, public_cert, public_key = issue(tmp_path, "public")
    monkeypatch.setenv("SSL_CERT_FILE", str(public_ca))
    assert uvloop.run(call_over_tls(node_cert, node_key, ca_file=node_ca)) == ANSWER
    assert uvloop.run(call_over_tls(public_cert, public_key, ca_file=node_ca)) == ANSWER

    async def post_to_the_node() -> None:
        server = await tls_server(node_cert, node_key, [])
        try:
            await webhook_post(f"https://localhost:{server.sockets[0].getsockname()[1]}/")
        finally:
            server.close()

    with pytest.raises(aiohttp.ClientConnectorCertificateError):
        uvloop.run(post_to_the_node())


def test_an_unreadable_ca_file_is_refused_at_start(tmp_path: Path) -> None:
    ca, _, _ = issue(tmp_path, "node")
    assert load_settings(upstream_ca_file=str(ca)).upstream_ca_file == str(ca)
    not_pem = tmp_path / "not-a-ca.pem"
    not_pem.write_text("hello\n")
    for path in (tmp_path / "missing.pem", not_pem):
        with pytest.raises(ConfigError, match="upstream_ca_file"):
            load_settings(upstream_ca_file=str(path))


def test_the_pubsub_client_trusts_upstream_ca_file_for_a_wss_node(tmp_path: Path) -> None:
    """``upstream_ws_url=wss://...`` of a node whose certificate a private CA signed: the PubSub client
    (a real ``websockets`` server with the CA's certificate stands in for the node) subscribes."""
    ca, cert, key = issue(tmp_path, "node")
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(cert, key)

    async def node(ws: ServerConnection) -> None:
        async for raw in ws:
            await ws.send(orjson.dumps({"jsonrpc": "2.0", "id": orjson.loads(raw)["id"], "result": 7}))

    async def main() -> None:
        async with serve(node, "127.0.0.1", 0, ssl=context) as server:
            port = next(iter(server.sockets)).getsockname()[1]
            pubsub = UpstreamPubSub(f"wss://localhost:{port}", connect_timeout_s=10, ca_file=str(ca))
            try:
                handle = await pubsub.subscribe("slotSubscribe", [], lambda _: None, lambda *_: None, lambda _: False)
                assert handle is not None and pubsub.connects == 1
            finally:
                await pubsub.close()

    asyncio.run(main())


def test_the_geyser_client_trusts_upstream_ca_file_for_a_tls_node(tmp_path: Path) -> None:
    """``upstream_grpc_url=https://...`` of a node whose certificate a private CA signed: the gRPC channel
    (to a real grpcio server with the CA's certificate) completes its TLS handshake and becomes ready."""
    ca, cert, key = issue(tmp_path, "node")
    assert b"BEGIN CERTIFICATE" in root_certificates(str(ca)).rpartition(b"\n-----END CERTIFICATE-----")[0]

    async def main() -> None:
        server = grpc.aio.server()
        port = server.add_secure_port(
            "127.0.0.1:0", grpc.ssl_server_credentials([(key.read_bytes(), cert.read_bytes())])
        )
        await server.start()
        node = UpstreamNode(name="tls", rpc_url="https://localhost:1", grpc_url=f"https://localhost:{port}")
        upstream = UpstreamGeyser(OneStreamNode(node), Fanout(), ca_file=str(ca))
        try:
            await asyncio.wait_for(upstream.channel(node).channel_ready(), 20)
        finally:
            await upstream.stop()
            await server.stop(None)

    asyncio.run(main())

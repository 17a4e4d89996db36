"""The node client over TLS with a real certificate chain, as docs/configuration.md's production example
(``GATEWAY_UPSTREAM_RPC_URL=https://your-node.example:8899``) connects.

The test makes a CA and a certificate it signed for ``localhost`` (cryptography), serves HTTPS with it on
127.0.0.1 (an asyncio server: no real node serves a certificate this test can make) and points the
client at the CA the way the docs say, through OpenSSL's ``SSL_CERT_FILE``.
"""

from __future__ import annotations

import asyncio
import datetime
import ipaddress
import ssl
from pathlib import Path

import pytest
import uvloop
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from gateway.node.http import HttpUpstream, UpstreamUnavailable

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


async def call_over_tls(cert: Path, key: Path) -> bytes:
    """One ``post`` to ``https://localhost:<port>`` served with ``cert``."""
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(cert, key)
    requests: list[bytes] = []

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

    server = await asyncio.start_server(serve, "127.0.0.1", 0, ssl=context)
    port = server.sockets[0].getsockname()[1]
    upstream = HttpUpstream(f"https://localhost:{port}")
    try:
        first = await upstream.post(b'{"jsonrpc":"2.0","id":1,"method":"getSlot"}', 5.0)
        second = await upstream.post(b'{"jsonrpc":"2.0","id":1,"method":"getSlot"}', 5.0)
        assert first == second
        assert upstream._pools[upstream.url].open_connections == 1  # kept alive over TLS
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

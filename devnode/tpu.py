"""The TPU: a QUIC listener that takes transactions the way a leader does.

Solana clients send a transaction straight to the leader's `tpuQuic` address (getClusterNodes names
it): a QUIC connection with ALPN `solana-tpu`, one client-initiated unidirectional stream per
transaction carrying its wire bytes, nothing answered on the stream. The devnode is the only leader,
so this is how a sender that skips RPC reaches it. When a stream ends its bytes are deserialized and
handed to the chain like a leader would (`send` with skip_preflight: no simulation, a transaction
that fails lands with its fee); what cannot be parsed, verified or paid for is dropped and logged at
debug, as a leader drops it, and the client learns the outcome through RPC.

The certificate is self-signed with the node identity's Ed25519 key, as Agave's is. Client
certificates are not asked for (every connection is treated as unstaked).

Bounds: a stream longer than one transaction (1,232 bytes) and any bidirectional stream are stopped
and dropped; a connection holds at most `MAX_OPEN_STREAMS` unfinished streams (aioquic itself lets
a peer open at most 128 at a time); all connections together buffer at most `MAX_BUFFERED_BYTES`;
at most `MAX_CONNECTIONS` connections are served at once.
"""

from __future__ import annotations

import asyncio
import datetime
import logging
import ssl
from typing import Any

from aioquic.asyncio.protocol import QuicConnectionProtocol
from aioquic.asyncio.server import QuicServer
from aioquic.quic.configuration import QuicConfiguration
from aioquic.quic.connection import QuicConnection
from aioquic.quic.events import ConnectionTerminated, HandshakeCompleted, QuicEvent, StreamDataReceived, StreamReset
from aioquic.quic.packet import QuicErrorCode
from cryptography import x509
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from cryptography.x509.oid import NameOID
from solders.keypair import Keypair
from solders.transaction import VersionedTransaction

from devnode.chain import Chain

log = logging.getLogger(__name__)

ALPN = "solana-tpu"
PACKET_DATA_SIZE = 1_232  # the largest serialized transaction
MAX_OPEN_STREAMS = 128
MAX_BUFFERED_BYTES = 16 * 1024 * 1024
MAX_CONNECTIONS = 256
IDLE_TIMEOUT_S = 10.0
STOP_CODE = 0  # application error code sent with STOP_SENDING when a stream is dropped


def self_signed_certificate(identity: Keypair) -> tuple[x509.Certificate, Ed25519PrivateKey]:
    """An Ed25519 certificate for the identity key, valid from a day ago for a year."""
    key = Ed25519PrivateKey.from_private_bytes(identity.secret())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "Solana node")])
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(days=1))
        .not_valid_after(now + datetime.timedelta(days=365))
        .add_extension(x509.SubjectAlternativeName([x509.DNSName("localhost")]), critical=False)
        .sign(key, algorithm=None)
    )
    return cert, key


class TpuListener:
    """The UDP socket, the QUIC server on it and the count of what arrived (`received`, `dropped`)."""

    def __init__(self, chain: Chain, identity: Keypair) -> None:
        self.chain = chain
        self.identity = identity
        self.port = 0
        self.received = 0
        self.dropped = 0
        self.buffered = 0  # bytes held by unfinished streams, all connections together
        self.connections = 0
        self._server: QuicServer | None = None

    async def start(self, host: str, port: int) -> int:
        """Bind UDP `host:port` (0 picks a free port) and serve; returns the bound port."""
        cert, key = self_signed_certificate(self.identity)
        configuration = QuicConfiguration(
            alpn_protocols=[ALPN],
            is_client=False,
            idle_timeout=IDLE_TIMEOUT_S,
            max_stream_data=PACKET_DATA_SIZE,
            verify_mode=ssl.CERT_NONE,
        )
        configuration.certificate = cert
        configuration.private_key = key
        loop = asyncio.get_running_loop()
        transport, server = await loop.create_datagram_endpoint(
            lambda: QuicServer(configuration=configuration, create_protocol=self._connection),
            local_addr=(host, port),
        )
        self._server = server
        self.port = int(transport.get_extra_info("sockname")[1])
        return self.port

    async def stop(self) -> None:
        if self._server is not None:
            self._server.close()
            self._server = None

    def _connection(self, quic: QuicConnection, **kwargs: Any) -> TpuConnection:
        return TpuConnection(quic, listener=self, **kwargs)

    def submit(self, wire: bytes) -> None:
        """One stream's bytes: deserialize and send as a leader would; drop (and log) what fails."""
        self.received += 1
        try:
            tx = VersionedTransaction.from_bytes(wire)
            tx.sanitize()
            self.chain.send(tx, skip_preflight=True)
        except Exception as exc:
            self.dropped += 1
            log.debug("tpu: dropped a %d-byte transaction: %s", len(wire), exc)


class TpuConnection(QuicConnectionProtocol):
    """One client connection: reassembles each unidirectional stream and submits it when it ends."""

    def __init__(self, quic: QuicConnection, *, listener: TpuListener, **kwargs: Any) -> None:
        super().__init__(quic, **kwargs)
        self._listener = listener
        self._streams: dict[int, bytearray] = {}
        self._dropped: set[int] = set()  # stopped streams whose end has not arrived yet
        self._counted = False

    def quic_event_received(self, event: QuicEvent) -> None:
        if isinstance(event, StreamDataReceived):
            self._on_data(event)
        elif isinstance(event, StreamReset):
            self._forget(event.stream_id)
            self._dropped.discard(event.stream_id)
        elif isinstance(event, HandshakeCompleted):
            self._on_handshake()
        elif isinstance(event, ConnectionTerminated):
            for stream_id in list(self._streams):
                self._forget(stream_id)
            self._dropped.clear()
            if self._counted:
                self._listener.connections -= 1
                self._counted = False

    def _on_handshake(self) -> None:
        if self._listener.connections >= MAX_CONNECTIONS:
            self.close(error_code=QuicErrorCode.CONNECTION_REFUSED, reason_phrase="too many connections")
            return
        self._listener.connections += 1
        self._counted = True

    def _on_data(self, event: StreamDataReceived) -> None:
        stream_id = event.stream_id
        if stream_id in self._dropped:
            if event.end_stream:
                self._dropped.discard(stream_id)
            return
        buf = self._streams.get(stream_id)
        if buf is None:
            unidirectional = stream_id & 2 == 2
            if not unidirectional or len(self._streams) >= MAX_OPEN_STREAMS:
                self._drop(stream_id, event.end_stream, "a bidirectional stream" if not unidirectional else "too many")
                return
            buf = self._streams[stream_id] = bytearray()
        size = len(buf) + len(event.data)
        if size > PACKET_DATA_SIZE or self._listener.buffered + len(event.data) > MAX_BUFFERED_BYTES:
            self._forget(stream_id)
            self._drop(stream_id, event.end_stream, f"{size} bytes or the listener's buffer is full")
            return
        buf += event.data
        self._listener.buffered += len(event.data)
        if event.end_stream:
            self._forget(stream_id)
            self._listener.submit(bytes(buf))

    def _forget(self, stream_id: int) -> None:
        buf = self._streams.pop(stream_id, None)
        if buf is not None:
            self._listener.buffered -= len(buf)

    def _drop(self, stream_id: int, ended: bool, why: str) -> None:
        self._listener.dropped += 1
        log.debug("tpu: dropped stream %d: %s", stream_id, why)
        if ended:
            return
        self._dropped.add(stream_id)
        try:
            self._quic.stop_stream(stream_id, STOP_CODE)
            if stream_id & 2 == 0:  # bidirectional: close our sending half too
                self._quic.reset_stream(stream_id, STOP_CODE)
        except ValueError:
            pass
        self.transmit()

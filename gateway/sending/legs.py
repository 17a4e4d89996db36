"""The ways a signed transaction reaches a leader. Each leg says whether it really sent.

- ``local_rpc``: the node's own ``sendTransaction`` (skipPreflight, no node-side retries).
- ``jito``: the bundle relay (a block engine): the transaction as a one-transaction bundle, as is. A
  block engine drops a bundle that does not tip, so this leg only sends transactions that tip.
- ``tpu_quic``: straight to the current and next leaders' TPU over QUIC (ALPN ``solana-tpu``, one
  unidirectional stream per transaction), their addresses from ``getClusterNodes`` and
  ``getSlotLeaders``. aioquic is the QUIC implementation (a maintained library; QUIC is not written
  here); cryptography makes the client certificate.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime
import logging
import ssl
import time
from collections.abc import Awaitable
from typing import Any, Protocol

from aioquic.asyncio.client import connect
from aioquic.asyncio.protocol import QuicConnectionProtocol
from aioquic.quic.configuration import QuicConfiguration
from cryptography import x509
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from cryptography.x509.oid import NameOID

from gateway.core.transactions import WireTx, tips
from gateway.node.http import ChainError, Upstream, UpstreamTimeout, UpstreamUnavailable, rpc_call
from gateway.sending.block_engine import BlockEngine
from gateway.sending.bundles import MIN_TIP_LAMPORTS, TIP_ACCOUNTS

log = logging.getLogger(__name__)

LOCAL_RPC = "local_rpc"
RELAY = "jito"
TPU_QUIC = "tpu_quic"
TPU_ALPN = "solana-tpu"
LEG_TIMEOUT_S = 2.0
LEADERS_AHEAD = 4  # slots whose leaders get the transaction: this one and the next few
LEADERS_TTL_S = 0.4


class Leg(Protocol):
    name: str

    async def send(self, tx: WireTx) -> bool:
        """Send once; True when the transaction really left (the leg's peer took it)."""
        ...

    async def close(self) -> None:
        """Let go of what the leg keeps open."""
        ...


async def _peer_took(leg: str, tx: WireTx, request: Awaitable[Any]) -> bool:
    """Whether a JSON-RPC send really left: refused (a stale blockhash, already processed...) is not
    sent; no answer counts as sent unless the request provably never left (a timeout may have)."""
    try:
        await request
    except ChainError as exc:
        log.debug("%s refused %s: %s", leg, tx.signature, exc)
        return False
    except UpstreamUnavailable as exc:
        return exc.sent
    except UpstreamTimeout:
        return True
    return True


class LocalRpcLeg:
    name = LOCAL_RPC

    def __init__(self, node: Upstream) -> None:
        self.node = node

    async def send(self, tx: WireTx) -> bool:
        config = {"encoding": "base64", "skipPreflight": True, "maxRetries": 0}
        return await _peer_took(
            self.name, tx, rpc_call(self.node, "sendTransaction", [tx.base64, config], LEG_TIMEOUT_S)
        )

    async def close(self) -> None:
        """The node's connections belong to whoever made the leg."""


class RelayLeg:
    name = RELAY

    def __init__(self, engine: BlockEngine) -> None:
        self.engine = engine

    async def send(self, tx: WireTx) -> bool:
        if tips(tx.tx, TIP_ACCOUNTS) < MIN_TIP_LAMPORTS:
            return False  # the engine would drop it: not sent
        return await _peer_took(self.name, tx, self.engine.call("sendBundle", [[tx.base64], {"encoding": "base64"}]))

    async def close(self) -> None:
        """The block engine's connections belong to whoever made the leg."""


class TpuQuicLeg:
    """QUIC to the leaders' TPU, one connection per leader kept open and reused (a leader admits only a
    few new connections per address and minute), presenting a self-signed Ed25519 client certificate
    as Agave's clients do (its server asks for one; unstaked, any key will do)."""

    name = TPU_QUIC

    def __init__(self, node: Upstream) -> None:
        self.node = node
        self._leaders: tuple[float, list[tuple[str, int]]] = (0.0, [])
        self._config = QuicConfiguration(is_client=True, alpn_protocols=[TPU_ALPN], verify_mode=ssl.CERT_NONE)
        self._config.certificate, self._config.private_key = client_certificate()
        self._connections: dict[tuple[str, int], tuple[contextlib.AsyncExitStack, QuicConnectionProtocol]] = {}
        self._opening: dict[tuple[str, int], asyncio.Lock] = {}

    async def send(self, tx: WireTx) -> bool:
        try:
            addresses = await self._leader_addresses()
        except (ChainError, UpstreamUnavailable, UpstreamTimeout) as exc:
            log.debug("tpu_quic: leaders unknown: %s", exc)
            return False
        results = await asyncio.gather(*(self._send_to(address, tx.raw) for address in addresses))
        return any(results)

    async def close(self) -> None:
        connections, self._connections = self._connections, {}
        for stack, _ in connections.values():
            with contextlib.suppress(Exception):
                await stack.aclose()

    async def _send_to(self, address: tuple[str, int], raw: bytes) -> bool:
        for attempt in range(2):  # a kept connection the leader has closed meanwhile: open a new one once
            try:
                async with asyncio.timeout(LEG_TIMEOUT_S):
                    client = await self._connection(address)
                    _, writer = await client.create_stream(is_unidirectional=True)
                    writer.write(raw)
                    writer.write_eof()
                    await client.ping()  # acknowledged: the peer has the stream's data and its end
                return True
            except (OSError, TimeoutError, ConnectionError) as exc:
                await self._drop(address)
                log.debug("tpu_quic to %s:%d failed (attempt %d): %s", *address, attempt + 1, exc)
        return False

    async def _connection(self, address: tuple[str, int]) -> QuicConnectionProtocol:
        async with self._opening.setdefault(address, asyncio.Lock()):
            kept = self._connections.get(address)
            if kept is not None:
                return kept[1]
            stack = contextlib.AsyncExitStack()
            try:
                client = await stack.enter_async_context(connect(*address, configuration=self._config))
            except BaseException:
                await stack.aclose()
                raise
            self._connections[address] = (stack, client)
            return client

    async def _drop(self, address: tuple[str, int]) -> None:
        kept = self._connections.pop(address, None)
        if kept is not None:
            with contextlib.suppress(Exception):
                await kept[0].aclose()

    async def _leader_addresses(self) -> list[tuple[str, int]]:
        fetched_at, cached = self._leaders
        if cached and time.monotonic() - fetched_at < LEADERS_TTL_S:
            return cached
        slot = await rpc_call(self.node, "getSlot", [], LEG_TIMEOUT_S)
        leaders = set(await rpc_call(self.node, "getSlotLeaders", [slot, LEADERS_AHEAD], LEG_TIMEOUT_S))
        addresses: list[tuple[str, int]] = []
        for node in await rpc_call(self.node, "getClusterNodes", [], LEG_TIMEOUT_S):
            if not isinstance(node, dict) or node.get("pubkey") not in leaders:
                continue
            quic = node.get("tpuQuic")
            if isinstance(quic, str) and ":" in quic:
                host, _, port = quic.rpartition(":")
                with contextlib.suppress(ValueError):
                    addresses.append((host.strip("[]"), int(port)))
        self._leaders = (time.monotonic(), addresses)
        return addresses


def client_certificate() -> tuple[x509.Certificate, Ed25519PrivateKey]:
    """A self-signed Ed25519 certificate of a fresh key: an unstaked client's identity."""
    key = Ed25519PrivateKey.generate()
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "Solana node")])
    now = datetime.datetime.now(datetime.UTC)
    certificate = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(days=1))
        .not_valid_after(now + datetime.timedelta(days=365))
        .sign(key, None)
    )
    return certificate, key

"""The TPU QUIC listener through a real aioquic client, as a sender that skips RPC reaches a leader:
ALPN `solana-tpu`, one unidirectional stream per transaction, the outcome read back through RPC."""

from __future__ import annotations

import ssl
from pathlib import Path
from typing import Any

import aiohttp
from aioquic.asyncio.client import connect
from aioquic.quic.configuration import QuicConfiguration
from solana.rpc.async_api import AsyncClient
from solders.keypair import Keypair
from solders.message import MessageV0
from solders.pubkey import Pubkey
from solders.system_program import TransferParams, transfer
from solders.transaction import VersionedTransaction

from devnode.chain.constants import IDENTITY
from devnode.node import Devnode
from devnode.tpu import PACKET_DATA_SIZE
from tests.devnode.helpers import start_node, wait_for, wait_landed

SOL = 10**9


async def cluster_node(rpc_url: str) -> dict[str, Any]:
    payload = {"jsonrpc": "2.0", "id": 1, "method": "getClusterNodes", "params": []}
    async with aiohttp.ClientSession() as session, session.post(rpc_url, json=payload) as resp:
        nodes = (await resp.json())["result"]
    assert len(nodes) == 1
    node: dict[str, Any] = nodes[0]
    return node


async def quic_send(address: str, *streams: bytes) -> None:
    """Each payload on its own unidirectional stream of one connection, then a ping: all delivered."""
    host, _, port = address.rpartition(":")
    configuration = QuicConfiguration(is_client=True, alpn_protocols=["solana-tpu"], verify_mode=ssl.CERT_NONE)
    async with connect(host.strip("[]"), int(port), configuration=configuration) as client:
        for data in streams:
            _, writer = await client.create_stream(is_unidirectional=True)
            writer.write(data)
            writer.write_eof()
        await client.ping()


async def signed_transfer(client: AsyncClient, payer: Keypair, to: Pubkey, lamports: int) -> VersionedTransaction:
    blockhash = (await client.get_latest_blockhash()).value.blockhash
    ix = transfer(TransferParams(from_pubkey=payer.pubkey(), to_pubkey=to, lamports=lamports))
    return VersionedTransaction(MessageV0.try_compile(payer.pubkey(), [ix], [], blockhash), [payer])


async def test_cluster_nodes_name_the_tpu_quic_address(node: Devnode) -> None:
    assert node.tpu is not None and node.tpu.port > 0
    entry = await cluster_node(node.rpc_url)
    assert entry["tpuQuic"] == node.tpu_quic_address == f"127.0.0.1:{node.tpu.port}"
    assert entry["pubkey"] == str(IDENTITY.pubkey())


async def test_without_the_tpu_tpu_quic_is_null(tmp_path: Path) -> None:
    off = await start_node(tmp_path / "devnode", tpu=False)
    try:
        assert off.tpu is None and off.tpu_quic_address is None
        assert (await cluster_node(off.rpc_url))["tpuQuic"] is None
    finally:
        await off.stop()


async def test_a_transfer_sent_over_quic_lands(node: Devnode, client: AsyncClient, funded: Keypair) -> None:
    assert node.tpu_quic_address is not None
    to = Keypair().pubkey()
    tx = await signed_transfer(client, funded, to, SOL)
    await quic_send(node.tpu_quic_address, bytes(tx))
    await wait_landed(client, tx.signatures[0], "confirmed")
    status = (await client.get_signature_statuses([tx.signatures[0]])).value[0]
    assert status is not None and status.err is None
    assert (await client.get_balance(to)).value == SOL


async def test_oversize_and_garbage_streams_are_dropped_and_the_listener_goes_on(
    node: Devnode, client: AsyncClient, funded: Keypair
) -> None:
    tpu, address = node.tpu, node.tpu_quic_address
    assert tpu is not None and address is not None
    first, second = Keypair().pubkey(), Keypair().pubkey()
    padded = await signed_transfer(client, funded, first, SOL)
    oversize = bytes(padded) + bytes(2 * PACKET_DATA_SIZE)  # a real transaction with trailing bytes
    good = await signed_transfer(client, funded, second, 2 * SOL)
    await quic_send(address, oversize, b"\x01garbage", bytes(good))  # the good one on the same connection
    await wait_landed(client, good.signatures[0], "confirmed")
    assert (await client.get_balance(second)).value == 2 * SOL
    assert tpu.dropped >= 2
    assert (await client.get_signature_statuses([padded.signatures[0]])).value[0] is None
    assert (await client.get_balance(first)).value == 0

    later = Keypair().pubkey()  # a new connection is still served
    tx = await signed_transfer(client, funded, later, SOL)
    await quic_send(address, bytes(tx))
    await wait_landed(client, tx.signatures[0])

    async def buffers_released() -> bool:
        return tpu.buffered == 0

    await wait_for(buffers_released)

"""How long sendAndConfirm takes to land on the devnode, against the devnode's own confirmation time.

    python -m bench.landing [--sends 40] [--slot-ms 400] [--legs local_rpc,jito,tpu_quic]

Both sides send the same kind of transaction (a signed SOL transfer on a fresh blockhash), one at a
time. The reference sends it to the node's ``sendTransaction`` and polls ``getSignatureStatuses``
every 10 ms until it is ``confirmed``: the fastest a client of the node alone can know. The gateway
side is one ``sendAndConfirm`` over HTTP through a :class:`gateway.app.replica.GatewayApp` served by uvicorn
in this process (races in the replica, no Ray), on embedded PostgreSQL and Redis: hold, race over
the legs, settle. Printed: p50/p90/p99 of each, and the ratio of the medians.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import statistics
import time

import aiohttp
from solana.rpc.async_api import AsyncClient
from solana.rpc.models import TxOpts
from solders.keypair import Keypair
from solders.message import Message
from solders.system_program import TransferParams, transfer
from solders.transaction import Transaction
from solders.transaction_status import TransactionConfirmationStatus

from bench.inprocess import Stores, gateway_on_devnode, run_with_stores

LANDED = (TransactionConfirmationStatus.Confirmed, TransactionConfirmationStatus.Finalized)


async def transfer_tx(node: AsyncClient, payer: Keypair) -> Transaction:
    blockhash = (await node.get_latest_blockhash()).value.blockhash
    ix = transfer(TransferParams(from_pubkey=payer.pubkey(), to_pubkey=Keypair().pubkey(), lamports=1_000_000))
    return Transaction([payer], Message.new_with_blockhash([ix], payer.pubkey(), blockhash), blockhash)


async def node_alone(node: AsyncClient, payer: Keypair) -> float:
    """Seconds from sendTransaction to a confirmed status, polling every 10 ms."""
    tx = await transfer_tx(node, payer)
    started = time.perf_counter()
    await node.send_raw_transaction(bytes(tx), TxOpts(skip_preflight=True))
    while True:
        status = (await node.get_signature_statuses([tx.signatures[0]])).value[0]
        if status is not None and status.confirmation_status in LANDED:
            return time.perf_counter() - started
        await asyncio.sleep(0.01)


async def through_gateway(http: aiohttp.ClientSession, url: str, key: str, node: AsyncClient, payer: Keypair) -> float:
    tx = await transfer_tx(node, payer)
    body = {"jsonrpc": "2.0", "id": 1, "method": "sendAndConfirm", "params": [base64.b64encode(bytes(tx)).decode()]}
    started = time.perf_counter()
    async with http.post(url, json=body, headers={"X-Api-Key": key}) as resp:
        answer = await resp.json()
    elapsed = time.perf_counter() - started
    if answer.get("result", {}).get("status") != "confirmed":
        raise RuntimeError(f"sendAndConfirm did not confirm: {answer}")
    return elapsed


def summary(name: str, seconds: list[float]) -> str:
    ms = sorted(s * 1000 for s in seconds)
    q = statistics.quantiles(ms, n=100, method="inclusive")
    return f"{name:<22} p50 {q[49]:7.0f} ms   p90 {q[89]:7.0f} ms   p99 {q[98]:7.0f} ms   (n={len(ms)})"


async def run(sends: int, slot_ms: int, legs: list[str], stores: Stores) -> None:
    async with gateway_on_devnode(stores, slot_ms, send_legs=legs) as running:
        payer = Keypair()
        async with AsyncClient(running.node.rpc_url) as client, aiohttp.ClientSession() as http:
            await client.request_airdrop(payer.pubkey(), 1_000 * 10**9)
            await asyncio.sleep(slot_ms / 1000 * 3)
            alone = [await node_alone(client, payer) for _ in range(sends)]
            gated = [
                await through_gateway(http, running.url + "/", running.api_key, client, payer) for _ in range(sends)
            ]
    print(f"slots of {slot_ms} ms; legs {', '.join(legs)}")
    print(summary("devnode alone", alone))
    print(summary("sendAndConfirm", gated))
    print(f"median ratio sendAndConfirm / devnode alone: {statistics.median(gated) / statistics.median(alone):.3f}")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.landing", description=__doc__.splitlines()[0])
    parser.add_argument("--sends", type=int, default=40)
    parser.add_argument("--slot-ms", type=int, default=400)
    parser.add_argument("--legs", default="local_rpc,jito,tpu_quic")
    args = parser.parse_args(argv)
    run_with_stores("gw-landing-", lambda stores: run(args.sends, args.slot_ms, args.legs.split(","), stores))


if __name__ == "__main__":
    main()

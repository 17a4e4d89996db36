"""The reconciler never settles a send ``expired`` from a node that no longer keeps the blocks since
its hold: a transaction that landed there and was purged (a node with a limited ledger, or restarted)
is not found either, which proves nothing. Found by the fault suite (tests/faults): a send whose racer
was killed landed, the reconciler came 20 s later to a devnode keeping 5 s of blocks, and settled it
expired, while the sink held its lamports.

A devnode of its own keeping 5 slots of history; the send held at its slot, landed, then 200 slots
later (its blockhash expired, its block purged): left pending, then released at the base fee (it was
broadcast; the landing price needs the proof) and marked once it is ``UNPROVEN_RELEASE_S`` old."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta
from pathlib import Path

import asyncpg
from solana.rpc.async_api import AsyncClient
from solders.keypair import Keypair

from gateway.node.http import HttpUpstream
from gateway.sending.reconcile import UNPROVEN_RELEASE_S, reconcile
from gateway.storage import sends
from gateway.storage.sends import HoldOutcome, SendStatus
from tests.credits.helpers import fund, new_pubkey
from tests.devnode.helpers import start_node, wait_landed
from tests.sending.helpers import pay


async def test_a_send_landed_before_the_nodes_history_is_left_pending_not_expired(
    tmp_path: Path, database_url: str
) -> None:
    node = await start_node(tmp_path / "devnode", retention_slots=5)
    pool = await asyncpg.create_pool(database_url, min_size=1, max_size=2)
    upstream = HttpUpstream(node.rpc_url)
    try:
        payer = Keypair()
        node.chain.airdrop(payer.pubkey(), 10**9)
        tx = pay(payer, 1_000_000, node.chain.latest_blockhash())
        owner = new_pubkey()
        await fund(pool, owner, 100)
        signature = str(tx.signatures[0])
        held = await sends.hold(
            pool, owner, signature, str(tx.message.recent_blockhash), 10, 2, "r1", hold_slot=node.chain.slot
        )
        assert held.outcome is HoldOutcome.HELD
        async with AsyncClient(node.rpc_url) as client:
            await client.send_raw_transaction(bytes(tx))
            await wait_landed(client, tx.signatures[0])
        for _ in range(200):  # the blockhash expires and the block is purged
            node.chain.tick()
        record = await sends.find(pool, signature)
        assert record is not None and record.status is SendStatus.PENDING

        after = await reconcile(pool, upstream, record, "test")
        assert after.status is SendStatus.PENDING  # not expired: the node cannot prove it did not land

        old = replace(record, created_at=record.created_at - timedelta(seconds=UNPROVEN_RELEASE_S + 1))
        released = await reconcile(pool, upstream, old, "test")  # as a pass that much later would
        assert released.status is SendStatus.EXPIRED and released.charged == 2  # the base fee held with it
        entries = await pool.fetch("SELECT amount, description FROM ledger_entries WHERE ref = $1", signature)
        assert [(r["amount"], r["description"]) for r in entries] == [(-2, f"sendAndConfirm expired: {signature}")]
        row = await pool.fetchrow("SELECT settled_by, error FROM sends WHERE signature = $1", signature)
        assert row["settled_by"] == "test:unproven" and "released unproven" in row["error"]
    finally:
        await upstream.close()
        await pool.close()
        await node.stop()

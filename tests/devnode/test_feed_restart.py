"""A devnode with the launch feed, stopped and started again on its data dir: the feed goes on with new
coins and never creates a mint a second time (a signal log kept across the restart would otherwise pair
one run's graduation with another run's newPair)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from solders.account import Account
from solders.pubkey import Pubkey

from devnode.config import DevnodeConfig
from devnode.node import Devnode
from devnode.records import TxRecord
from pumpfun.events import CreateEvent, decode_program_data_log
from tests.devnode.helpers import wait_for


class Creates:
    """A chain listener keeping the mint of every CreateEvent the chain records."""

    def __init__(self) -> None:
        self.mints: list[Pubkey] = []

    def on_transaction(self, rec: TxRecord, changed: list[tuple[Pubkey, Account | None]]) -> None:
        for line in rec.log_messages:
            if line.startswith("Program data: "):
                event: Any = decode_program_data_log(line)
                if isinstance(event, CreateEvent):
                    self.mints.append(event.mint)

    def on_slot(self, slot: int, parent: int, root: int) -> None:
        pass


async def run_until_created(data_dir: Path, count: int) -> tuple[list[Pubkey], list[Pubkey]]:
    """Start a feed devnode on `data_dir`, wait for `count` creates, stop it: the mints and the feed's traders."""
    node = Devnode(DevnodeConfig(data_dir=data_dir, rpc_port=0, ws_port=0, slot_ms=50, feed=True, feed_interval_ms=20))
    creates = Creates()
    node.chain.add_listener(creates)
    await node.start()
    try:
        traders = list(node._feed.traders)

        async def created() -> bool:
            return len(creates.mints) >= count

        await wait_for(created, within_s=60)  # a bound on a hang, not a measurement
    finally:
        await node.stop()
    return creates.mints, traders


async def test_a_restarted_devnode_never_launches_a_mint_twice(tmp_path: Path) -> None:
    data_dir = tmp_path / "devnode"
    first, traders = await run_until_created(data_dir, 8)
    second, traders_again = await run_until_created(data_dir, 8)
    assert traders_again == traders  # the same generated wallets, funded from the persisted chain
    assert len(set(first)) == len(first) and len(set(second)) == len(second)
    assert not set(first) & set(second), "a mint was created again after the restart"
    assert (data_dir / "feed.json").exists()

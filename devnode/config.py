"""Configuration of the local chain; the ``gateway devnode`` CLI builds one of these and hands it to `Devnode`."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class DevnodeConfig:
    """Where the devnode keeps its files, where it listens, what it serves and how fast its slot clock runs;
    or which devnode it follows."""

    data_dir: Path  # <gateway data dir>/devnode ; created if missing
    host: str = "127.0.0.1"
    rpc_port: int = 8899  # 0 picks a free port
    ws_port: int = 8900  # 0 picks a free port
    tpu: bool = True  # the TPU QUIC listener (devnode/tpu.py); off: getClusterNodes reports tpuQuic null
    tpu_port: int = 0  # UDP; 0 picks a free port (clients find it through getClusterNodes' tpuQuic)
    block_engine: bool = True  # the local block engine under <rpc>/api/v1 (devnode/block_engine/)
    geyser: bool = True  # the geyser gRPC server, Yellowstone's interface (devnode/geyser.py)
    grpc_port: int = 0  # its TCP port; 0 picks a free port (Devnode.grpc_url tells which)
    slot_ms: int = 400  # slot clock
    retention_slots: int = 54_000  # ~6 h at 400 ms; blocks/tx older than this are purged
    feed: bool = False  # launch-platform feed on/off (devnode/feed/)
    feed_seed: int = 7
    feed_interval_ms: int = 1_000
    # A leader keeps a replication log of this many slots (devnode/replication/): how far back a follower
    # resumes, and the largest lag a follower may ask for. 0: no log, no followers.
    replication_slots: int = 1_024
    # Follow the devnode at this RPC URL instead of running a chain: serve its genesis, slots, accounts and
    # transactions, forward sendTransaction / requestAirdrop to it. A follower has no slot clock, no TPU, no
    # block engine and no feed (whatever the fields above say) and keeps no state in data_dir.
    follow: str | None = None
    lag_slots: int = 0  # a follower stays this many slots behind its leader (at most its replication_slots)
    follow_timeout_s: float = 30.0  # a follower's start() waits this long for its first sync, then fails
    # Written once listening (and removed on stop): the node's URLs as JSON, so that whoever started the process
    # learns the ports it picked (rpc_port=0 ...).
    ready_file: Path | None = None

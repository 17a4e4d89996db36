"""`python -m devnode`: run the local chain alone, or (`--follow URL`) as an RPC node of another devnode.

`--ready-file PATH` has the process write its URLs (rpc_url, ws_url, grpc_url, ...) as JSON once it listens,
so that whoever started it with port 0 learns the ports."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import signal
from pathlib import Path

from devnode.config import DevnodeConfig
from devnode.node import serve
from devnode.replication import FollowError


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m devnode", description="Local Solana node backed by LiteSVM")
    parser.add_argument("--data-dir", type=Path, default=Path(".gateway") / "devnode")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--rpc-port", type=int, default=8899)
    parser.add_argument("--ws-port", type=int, default=8900)
    parser.add_argument("--tpu", action=argparse.BooleanOptionalAction, default=True, help="TPU QUIC listener")
    parser.add_argument("--tpu-port", type=int, default=0, help="TPU QUIC UDP port (0: a free one)")
    parser.add_argument(
        "--block-engine", action=argparse.BooleanOptionalAction, default=True, help="block engine under /api/v1"
    )
    parser.add_argument("--geyser", action=argparse.BooleanOptionalAction, default=True, help="geyser gRPC server")
    parser.add_argument("--grpc-port", type=int, default=0, help="geyser gRPC port (0: a free one)")
    parser.add_argument("--slot-ms", type=int, default=400)
    parser.add_argument("--retention-slots", type=int, default=54_000)
    parser.add_argument("--feed", action=argparse.BooleanOptionalAction, default=False)
    parser.add_argument("--feed-seed", type=int, default=7)
    parser.add_argument("--feed-interval-ms", type=int, default=1_000)
    parser.add_argument(
        "--replication-slots", type=int, default=1_024, help="slots of the replication log followers read (0: none)"
    )
    parser.add_argument(
        "--follow", metavar="URL", help="follow the devnode at this RPC URL (no feed, TPU, block engine)"
    )
    parser.add_argument("--lag-slots", type=int, default=0, help="with --follow: stay this many slots behind")
    parser.add_argument("--follow-timeout", type=float, default=30.0, help="with --follow: seconds to the first sync")
    parser.add_argument("--ready-file", type=Path, help="write the node's URLs here as JSON once listening")
    args = parser.parse_args(argv)
    following = args.follow is not None
    if args.lag_slots and not following:
        parser.error("--lag-slots needs --follow")
    if args.lag_slots < 0:
        parser.error("--lag-slots must not be negative")
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    config = DevnodeConfig(
        data_dir=args.data_dir,
        host=args.host,
        rpc_port=args.rpc_port,
        ws_port=args.ws_port,
        tpu=args.tpu and not following,
        tpu_port=args.tpu_port,
        block_engine=args.block_engine and not following,
        geyser=args.geyser,
        grpc_port=args.grpc_port,
        slot_ms=args.slot_ms,
        retention_slots=args.retention_slots,
        feed=args.feed and not following,
        feed_seed=args.feed_seed,
        feed_interval_ms=args.feed_interval_ms,
        replication_slots=args.replication_slots,
        follow=args.follow,
        lag_slots=args.lag_slots,
        follow_timeout_s=args.follow_timeout,
        ready_file=args.ready_file,
    )
    with contextlib.suppress(KeyboardInterrupt):
        try:
            asyncio.run(_run(config))
        except FollowError as exc:
            parser.exit(1, f"devnode: cannot follow: {exc}\n")


async def _run(config: DevnodeConfig) -> None:
    """Serve until SIGINT or SIGTERM; either cancels `serve`, which then stops and persists."""
    task = asyncio.current_task()
    assert task is not None
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(signum, task.cancel)
    with contextlib.suppress(asyncio.CancelledError):
        await serve(config)


if __name__ == "__main__":
    main()

"""`python -m devnode`: run the local chain alone."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import signal
from pathlib import Path

from devnode.config import DevnodeConfig
from devnode.node import serve


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
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    config = DevnodeConfig(
        data_dir=args.data_dir,
        host=args.host,
        rpc_port=args.rpc_port,
        ws_port=args.ws_port,
        tpu=args.tpu,
        tpu_port=args.tpu_port,
        block_engine=args.block_engine,
        geyser=args.geyser,
        grpc_port=args.grpc_port,
        slot_ms=args.slot_ms,
        retention_slots=args.retention_slots,
        feed=args.feed,
        feed_seed=args.feed_seed,
        feed_interval_ms=args.feed_interval_ms,
    )
    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(_run(config))


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

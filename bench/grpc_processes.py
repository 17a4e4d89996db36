"""The processes of ``bench/grpc_stream.py``, one subcommand each (run by the harness, not by hand):

    python -m bench.grpc_processes source --port P --updates FILE      the replay source
    python -m bench.grpc_processes relay --port P --upstream HOST:PORT  the baseline relay
    python -m bench.grpc_processes gateway --settings JSON              the gateway's gRPC stream server
    python -m bench.grpc_processes clients --port P --streams N [--token T] [--mode tx|slots]

The clients read commands on stdin (``start``, ``stop``, ``quit``) and answer JSON lines on stdout.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import grpc
import orjson

from bench._proc import LOOPBACK, emit
from geyser_proto import geyser_pb2

_SERVICE = "/geyser.Geyser/"


def _subscribe_raw(channel: grpc.aio.Channel) -> Any:
    """Subscribe with raw update bytes (no parsing on the way in)."""
    return channel.stream_stream(
        _SERVICE + "Subscribe", request_serializer=geyser_pb2.SubscribeRequest.SerializeToString
    )


# -- the replay source (the ``source`` subcommand) ----------------------------------------------------


#: The source's slots: one every 400 ms, as the chain's.
SLOT_S = 0.4
#: With nothing to send for this long (the rate at 0), the source sends a ping: a node's subscription always
#: brings something (slot statuses, pings), and the gateway leaves one silent for 3 s as hung.
IDLE_PING_S = 1.0


class Source:
    """Streams the recorded updates to every subscriber at ``rate`` a second (set by ``Ping(count)``).

    Each one sent is a transaction of its own, as a node's feed is: its signature made unique by the count of
    updates sent (the first 8 bytes), its slot the source's (advancing every ``SLOT_S``). The recorded ones
    repeated as they are would be the same 500 transactions over and over, which the gateway's subscription
    drops as delivered already (:class:`gateway.node.geyser_moves.Delivered`: a node's replay after a move)."""

    def __init__(self, recorded: list[bytes]) -> None:
        self.updates = [geyser_pb2.SubscribeUpdate.FromString(raw) for raw in recorded]
        self.first_slot = max(u.transaction.slot for u in self.updates) + 1
        self.rate = 0.0
        self.queues: set[asyncio.Queue[bytes]] = set()

    async def Subscribe(self, requests: Any, context: grpc.aio.ServicerContext) -> None:
        await anext(aiter(requests))
        queue: asyncio.Queue[bytes] = asyncio.Queue()
        self.queues.add(queue)
        try:
            while True:
                await context.write(await queue.get())
        finally:
            self.queues.discard(queue)

    async def Ping(self, request: geyser_pb2.PingRequest, context: grpc.aio.ServicerContext) -> Any:
        self.rate = float(request.count)
        return geyser_pb2.PongResponse(count=request.count)

    async def pace(self) -> None:
        """Send what the rate owes since the last turn, every 5 ms (paced by the clock, not by the sleeps)."""
        loop = asyncio.get_running_loop()
        owed, n, last = 0.0, 0, loop.time()
        started = sent = last
        while True:
            await asyncio.sleep(0.005)
            now = loop.time()
            owed, last = owed + self.rate * (now - last), now
            slot = self.first_slot + int((now - started) / SLOT_S)
            while owed >= 1:
                owed -= 1
                update = self.updates[n % len(self.updates)]
                tx = update.transaction
                tx.slot = slot
                tx.transaction.signature = n.to_bytes(8, "little") + tx.transaction.signature[8:]
                n += 1
                update.created_at.GetCurrentTime()
                self._send(update.SerializeToString())
                sent = now
            if not self.rate:
                owed = 0.0
                if now - sent >= IDLE_PING_S:
                    ping = geyser_pb2.SubscribeUpdate(ping=geyser_pb2.SubscribeUpdatePing())
                    ping.created_at.GetCurrentTime()
                    self._send(ping.SerializeToString())
                    sent = now

    def _send(self, raw: bytes) -> None:
        for queue in self.queues:
            queue.put_nowait(raw)


async def source(args: argparse.Namespace) -> None:
    from geyser_proto.streaming import service_handler

    recorded = orjson.loads(await asyncio.to_thread(Path(args.updates).read_bytes))
    src = Source([bytes.fromhex(raw) for raw in recorded])
    server = grpc.aio.server()
    server.add_generic_rpc_handlers((service_handler(src, "the replay source"),))
    server.add_insecure_port(f"{LOOPBACK}:{args.port}")
    await server.start()
    await src.pace()


# -- the baseline relay (the ``relay`` subcommand) ----------------------------------------------------


class Relay:
    """One upstream subscription; every update's bytes to every stream, through a queue per stream."""

    def __init__(self) -> None:
        self.queues: set[asyncio.Queue[bytes]] = set()

    async def Subscribe(self, requests: Any, context: grpc.aio.ServicerContext) -> None:
        queue: asyncio.Queue[bytes] = asyncio.Queue()
        self.queues.add(queue)
        try:
            while True:
                await context.write(await queue.get())
        finally:
            self.queues.discard(queue)

    async def follow(self, upstream: str) -> None:
        everything = geyser_pb2.SubscribeRequest(
            slots={"s": geyser_pb2.SubscribeRequestFilterSlots()},
            transactions={"t": geyser_pb2.SubscribeRequestFilterTransactions()},
        )
        async with grpc.aio.insecure_channel(upstream) as channel:
            async for raw in _subscribe_raw(channel)(iter([everything])):
                for queue in self.queues:
                    queue.put_nowait(raw)


async def relay(args: argparse.Namespace) -> None:
    from gateway.app.settings import Settings
    from gateway.grpc.server import tune_gc
    from geyser_proto.streaming import service_handler

    tune_gc(Settings())  # the gateway's GC setting: compare the code

    rel = Relay()
    server = grpc.aio.server()
    server.add_generic_rpc_handlers((service_handler(rel, "the baseline relay"),))
    server.add_insecure_port(f"{LOOPBACK}:{args.port}")
    await server.start()
    await rel.follow(args.upstream)


# -- the gateway's server (the ``gateway`` subcommand) ------------------------------------------------


async def serve_gateway(args: argparse.Namespace) -> None:
    from gateway.app.settings import Settings
    from gateway.grpc.server import GrpcStreamServer, tune_gc

    settings = Settings.model_validate(orjson.loads(args.settings))
    tune_gc(settings)  # as the actor does
    server = GrpcStreamServer(settings)
    await server.start()
    try:
        await asyncio.Event().wait()
    finally:
        await server.stop()


# -- the streams (the ``clients`` subcommand) ---------------------------------------------------------


@dataclass
class Counted:
    count: int = 0
    latencies: list[float] = field(default_factory=list)
    error: str | None = None


async def clients(args: argparse.Namespace) -> None:
    """Open ``--streams`` streams; on ``start`` reset the counts, on ``stop`` report them (JSON lines)."""
    metadata = (("x-token", args.token),) if args.token else ()
    wanted = (
        geyser_pb2.SubscribeRequest(slots={"slots": geyser_pb2.SubscribeRequestFilterSlots()})
        if args.mode == "slots"
        else geyser_pb2.SubscribeRequest(transactions={"all": geyser_pb2.SubscribeRequestFilterTransactions()})
    )
    counted = [Counted() for _ in range(args.streams)]
    channel = grpc.aio.insecure_channel(f"{LOOPBACK}:{args.port}")
    subscribe = _subscribe_raw(channel)

    async def one(n: int, ready: asyncio.Event) -> None:
        mine, timed = counted[n], n % 10 == 0 or args.mode == "slots"
        call = subscribe(metadata=metadata)
        try:
            await call.write(wanted)
            ready.set()
            async for raw in call:
                mine.count += 1
                if timed:
                    update = geyser_pb2.SubscribeUpdate.FromString(raw)
                    if update.HasField("created_at") and update.WhichOneof("update_oneof") in ("slot", "transaction"):
                        mine.latencies.append(time.time() - update.created_at.ToNanoseconds() / 1e9)
        except grpc.aio.AioRpcError as exc:
            mine.error = f"{exc.code().name}: {exc.details()}"
        finally:
            ready.set()

    readies = [asyncio.Event() for _ in range(args.streams)]
    tasks = [asyncio.create_task(one(n, ready)) for n, ready in enumerate(readies)]
    for ready in readies:
        await ready.wait()
    emit({"event": "ready"})
    loop = asyncio.get_running_loop()
    while (command := (await loop.run_in_executor(None, sys.stdin.readline)).strip()) != "quit":
        if command == "start":
            for c in counted:
                c.count, c.latencies = 0, []
            started = time.perf_counter()
            emit({"event": "started"})
        elif command == "stop":
            seconds = time.perf_counter() - started
            latencies = [s for c in counted for s in c.latencies]
            errors = [c.error for c in counted if c.error]
            emit(
                {
                    "event": "done",
                    "seconds": seconds,
                    "counts": [c.count for c in counted],
                    "latencies": latencies,
                    "errors": errors,
                }
            )
    for task in tasks:
        task.cancel()
    await channel.close()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.grpc_processes")
    sub = parser.add_subparsers(dest="command", required=True)
    src = sub.add_parser("source")
    src.add_argument("--port", type=int, required=True)
    src.add_argument("--updates", required=True)
    rel = sub.add_parser("relay")
    rel.add_argument("--port", type=int, required=True)
    rel.add_argument("--upstream", required=True)
    gw = sub.add_parser("gateway")
    gw.add_argument("--settings", required=True)
    cl = sub.add_parser("clients")
    cl.add_argument("--port", type=int, required=True)
    cl.add_argument("--streams", type=int, required=True)
    cl.add_argument("--token", default="")
    cl.add_argument("--mode", choices=("tx", "slots"), default="tx")
    args = parser.parse_args(argv)
    commands = {"source": source, "relay": relay, "gateway": serve_gateway, "clients": clients}
    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(commands[args.command](args))


if __name__ == "__main__":
    main()

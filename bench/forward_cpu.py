"""CPU per call of the forwarder alone, as served: its response cache on, one node answering at once.

    python -m bench.forward_cpu [--calls 5000] [--rounds 7]

The JSON-RPC pipeline's last stage (:class:`gateway.rpc.forward.Forwarder`) on calls already parsed and
planned, ending in ``bench.pipeline_cpu``'s :class:`ConstantNode`: no stores, no sockets, so a change of a
few microseconds in the forwarder shows above the noise that PostgreSQL's flushes and the auth stores
put in ``bench.pipeline_cpu``'s rows. Rows: a ``getSlot`` (a method the cache never holds) and a batch
of 100 of them, µs of process CPU per request, the median of the rounds.
"""

from __future__ import annotations

import argparse
import asyncio
import time
from statistics import median

import orjson

from bench.pipeline_cpu import BASE_HEADERS, BATCH_BODY, BODY, ConstantNode
from gateway.core.jsonrpc import parse_payload
from gateway.core.methods import MethodClass
from gateway.pipeline.http import http_call
from gateway.pipeline.stages import Call, ReplyStyle
from gateway.rpc.forward import Forwarder
from gateway.rpc.response_cache import ResponseCache

#: The replica's default LRU size (``response_cache_entries``); nothing here is kept in it.
ENTRIES = 10_000


def planned_call(body: bytes) -> Call:
    """A call as the forwarder receives it: parsed, each item planned as a cheap read."""
    call = http_call("POST", "/", BASE_HEADERS, body, style=ReplyStyle.JSONRPC)
    call.payload = parse_payload(body)
    for item in call.payload.items:
        item.method_class = MethodClass.READ_CHEAP
    return call


async def per_call_us(forwarder: Forwarder, body: bytes, calls: int) -> float:
    prepared = [planned_call(body) for _ in range(calls)]
    start = time.process_time_ns()
    for call in prepared:
        reply = await forwarder(call)
    spent = time.process_time_ns() - start
    answers = orjson.loads(reply.body)  # the last call was answered, every item of it
    items = len(parse_payload(body).items)
    if reply.status != 200 or len(answers if isinstance(answers, list) else [answers]) != items:
        raise RuntimeError(f"the forwarder did not answer: {reply.status} {reply.body[:200]!r}")
    return spent / calls / 1e3


async def measure(calls: int, rounds: int) -> dict[str, float]:
    forwarder = Forwarder(ConstantNode(), {}, ResponseCache(ENTRIES, 0.0, lambda: None))
    for _ in range(300):  # warm
        await forwarder(planned_call(BODY))
    single: list[float] = []
    batch: list[float] = []
    for _ in range(rounds):
        single.append(await per_call_us(forwarder, BODY, calls))
        batch.append(await per_call_us(forwarder, BATCH_BODY, max(calls // 25, 10)))
    return {"getSlot": median(single), "batch of 100": median(batch)}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.forward_cpu", description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=5_000)
    parser.add_argument("--rounds", type=int, default=7)
    args = parser.parse_args(argv)
    if args.calls < 1 or args.rounds < 1:
        parser.error("--calls and --rounds must be at least 1")
    for name, us in asyncio.run(measure(args.calls, args.rounds)).items():
        print(f"{name:<14} {us:8.2f} µs/request")


if __name__ == "__main__":
    main()

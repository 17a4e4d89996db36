"""GeyserStream against a running gateway's gRPC port, through a TCP relay the test cuts: the stream resumes
with from_slot = the last slot it delivered, and the consumer sees every slot update once, none missing."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator

import grpc
import pytest

from gateway_client import GeyserStream
from gateway_client.geyser import GeyserOptions, pb2, slot_of


class Relay:
    """127.0.0.1:<port> → the gateway's gRPC address; :meth:`cut` drops every connection open through it."""

    def __init__(self, target: str) -> None:
        self.host, port = target.rsplit(":", 1)
        self.port = int(port)
        self.writers: set[asyncio.StreamWriter] = set()
        self.server: asyncio.Server | None = None

    async def start(self) -> str:
        self.server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        return f"127.0.0.1:{self.server.sockets[0].getsockname()[1]}"

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        up_reader, up_writer = await asyncio.open_connection(self.host, self.port)
        self.writers |= {writer, up_writer}

        async def pipe(src: asyncio.StreamReader, dst: asyncio.StreamWriter) -> None:
            with contextlib.suppress(OSError, ConnectionError):
                while data := await src.read(65536):
                    dst.write(data)
                    await dst.drain()
            dst.close()

        await asyncio.gather(pipe(reader, up_writer), pipe(up_reader, writer))

    def cut(self) -> None:
        for writer in self.writers:
            writer.transport.abort()  # a reset, as a network failure: no goodbye
        self.writers.clear()

    async def close(self) -> None:
        self.cut()
        if self.server is not None:
            self.server.close()


@pytest.fixture
async def relay(grpc_target: str) -> AsyncIterator[Relay]:
    relay = Relay(grpc_target)
    yield relay
    await relay.close()


async def test_a_cut_stream_resumes_from_its_last_slot_each_update_once(api_key: str, relay: Relay) -> None:
    target = await relay.start()
    request = pb2.SubscribeRequest(slots={"s": pb2.SubscribeRequestFilterSlots()}, commitment=pb2.PROCESSED)
    seen: list[tuple[int, int]] = []
    cut_at: int | None = None
    options = GeyserOptions(first_backoff_s=0.1, max_backoff_s=0.5)
    async with GeyserStream(target, api_key, request, options=options) as stream:
        async with asyncio.timeout(60):
            async for update in stream:
                if update.WhichOneof("update_oneof") == "slot":
                    seen.append((update.slot.slot, update.slot.status))
                if len(seen) == 15 and stream.connects == 1:
                    cut_at = stream.last_slot
                    relay.cut()
                if cut_at is not None and stream.connects == 2 and (slot_of(update) or 0) > cut_at + 10:
                    break
        assert stream.connects == 2
        assert stream.duplicates > 0  # the replay sent the last slot's updates again; dropped here
    assert len(seen) == len(set(seen)), "an update delivered twice"
    processed = sorted({slot for slot, status in seen if status == pb2.SLOT_PROCESSED})
    assert processed == list(range(processed[0], processed[-1] + 1)), "a slot missing around the cut"


async def test_a_refused_token_is_raised_not_retried(grpc_target: str) -> None:
    request = pb2.SubscribeRequest(slots={"s": pb2.SubscribeRequestFilterSlots()})
    async with GeyserStream(grpc_target, "srpc_live_" + "C" * 43, request) as stream:
        with pytest.raises(grpc.aio.AioRpcError) as refused:
            await anext(stream)
        assert refused.value.code() == grpc.StatusCode.UNAUTHENTICATED
        assert stream.connects == 1

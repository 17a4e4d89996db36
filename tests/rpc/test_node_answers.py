"""A node answer is read up to a size bound (``upstream_max_answer_bytes``), never whole whatever its size.

Through a running gateway in front of the session's devnode (behind the keeping relay), with the bound
set low so that real answers cross it; and the node's side of a chunked answer (no Content-Length)
from a small HTTP server of this test, since no real node answers that way on command.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import asyncpg
import pytest
from aiohttp import web
from solders.keypair import Keypair

from gateway.node.http import HttpUpstream, UpstreamTooLarge
from gateway.runtime.ports import free_port
from tests.rpc.test_response_cache import TX_PRICE, finalized_transfer, post, relayed, rpc
from tests.sending.conftest import FailingRelay

LIMIT = 16 << 10


async def test_an_answer_over_the_bound_is_a_clear_error_and_charged(
    relay: FailingRelay, tmp_path: Path, database_url: str, redis_url: str, db: asyncpg.Connection, payer: Keypair
) -> None:
    sig = await finalized_transfer(relay.node_url, payer)
    params: list[Any] = [sig, {"commitment": "confirmed"}]  # not cached: every call goes to the node
    async with relayed(relay, tmp_path, database_url, redis_url, db, upstream_max_answer_bytes=LIMIT) as (_, caller):
        one = await rpc(caller, "getTransaction", params)
        assert one.doc["result"]["transaction"]["signatures"] == [sig]  # ~1.5 KB: under the bound
        batch = [{"jsonrpc": "2.0", "id": n, "method": "getTransaction", "params": params} for n in range(20)]
        big = await post(caller, batch)  # ~30 KB in one node answer: over it
        assert big.status == 200 and len(big.raw) < 20 * 500
        assert [a["id"] for a in big.doc] == list(range(20))
        for answer in big.doc:
            assert answer["error"]["code"] == -32012
            assert "larger than" in answer["error"]["message"] and "limit" in answer["error"]["message"]
        assert relay.count(sig) == 2  # the node answered both
        # the node did the work: each call is charged, as a node error is (docs/api.md, Limits)
        assert one.remaining - big.remaining == 20 * TX_PRICE
        after = await rpc(caller, "getTransaction", params)  # the connection dropped unread is not reused
        assert after.raw == one.raw and one.remaining - after.remaining == 21 * TX_PRICE


@pytest.fixture
async def chunked_node() -> AsyncIterator[str]:
    """An HTTP server answering ``{"result": "x...x"}`` of ``?size=`` bytes, chunked, no Content-Length."""

    async def answer(request: web.Request) -> web.StreamResponse:
        size = int(request.query["size"])
        resp = web.StreamResponse(headers={"Content-Type": "application/json"})
        resp.enable_chunked_encoding()
        await resp.prepare(request)
        await resp.write(b'{"jsonrpc":"2.0","id":1,"result":"')
        for start in range(0, size, 4096):
            await resp.write(b"x" * min(4096, size - start))
        await resp.write(b'"}')
        await resp.write_eof()
        return resp

    app = web.Application()
    app.router.add_post("/", answer)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    port = free_port()
    await web.TCPSite(runner, "127.0.0.1", port).start()
    yield f"http://127.0.0.1:{port}/"
    await runner.cleanup()


async def test_a_chunked_answer_is_read_up_to_the_bound(chunked_node: str) -> None:
    small = HttpUpstream(f"{chunked_node}?size={LIMIT // 2}", max_answer_bytes=LIMIT)
    huge = HttpUpstream(f"{chunked_node}?size={64 << 20}", max_answer_bytes=LIMIT)
    try:
        assert len(await small.post(b"{}", 10)) > LIMIT // 2
        with pytest.raises(UpstreamTooLarge) as raised:
            await huge.post(b"{}", 10)  # 64 MiB offered: refused after the first 16 KiB
        assert raised.value.sent and raised.value.limit == LIMIT
        assert len(await small.post(b"{}", 10)) > LIMIT // 2  # the session still serves
    finally:
        await small.close()
        await huge.close()

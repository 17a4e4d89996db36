"""``/x402/blockhash`` when the node's ``lastValidBlockHeight`` is not a block height.

The node here is a fake (an object answering ``post`` with fixed bytes): the hostile node is the
subject, and the devnode does not send malformed heights on command. ``int()`` took a string of
Arabic-Indic digits, ``true`` and ``1.5``; each is now the node's failure (502 ``UPSTREAM_ERROR``).
"""

from __future__ import annotations

import orjson
import pytest

from gateway.core.errors import ProxyError
from gateway.x402.blockhash import RecentBlockhash

BLOCKHASH = "4sGjMW1sUnHzSxGspuhpqLDx6wiyjNtZAMdL4VZHirAn"


class FakeNode:
    def __init__(self, height: object) -> None:
        self.height = height

    async def post(self, body: bytes, timeout_s: float, *, replayable: bool = False) -> bytes:
        value = {"blockhash": BLOCKHASH, "lastValidBlockHeight": self.height}
        return orjson.dumps({"jsonrpc": "2.0", "id": 1, "result": {"context": {"slot": 1}, "value": value}})


@pytest.mark.parametrize("height", ["\u0661\u0662\u0663", "123", True, 1.5, -1])
async def test_a_height_that_is_not_a_whole_u64_is_the_nodes_failure(height: object) -> None:
    with pytest.raises(ProxyError) as caught:
        await RecentBlockhash(FakeNode(height)).recent()
    assert caught.value.status == 502 and caught.value.constant == "UPSTREAM_ERROR"


async def test_a_block_height_is_read() -> None:
    recent = await RecentBlockhash(FakeNode(123_456)).recent()
    assert (recent.blockhash, recent.last_valid_block_height) == (BLOCKHASH, 123_456)

"""The readiness stage (gateway/pipeline/readiness.py): 503 -32003 with Retry-After while no node is in
service for reads, the call handed on once one is; it reads the nodes alone."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from gateway.core.errors import ProxyError
from gateway.pipeline.readiness import Readiness
from gateway.pipeline.stages import Call, Reply, json_reply


@dataclass
class Nodes:
    ready: bool


async def _served(call: Call) -> Reply:
    return json_reply(200, {"ok": True})


async def test_no_node_in_service_is_a_503_with_retry_after() -> None:
    with pytest.raises(ProxyError) as refused:
        await Readiness(Nodes(ready=False), 2)(Call("POST", "/", {}, {}, b"{}"), _served)
    assert refused.value.status == 503
    assert refused.value.headers.get("Retry-After") == "2"


async def test_a_node_in_service_hands_the_call_on() -> None:
    nodes = Nodes(ready=False)
    readiness = Readiness(nodes, 2)
    nodes.ready = True  # read per call
    reply = await readiness(Call("POST", "/", {}, {}, b"{}"), _served)
    assert reply.status == 200

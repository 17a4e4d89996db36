"""BodyDeadline on plain ASGI messages (through a real server: tests/pubsub/test_connection_limits.py and
tests/stacks/edge/test_edge.py)."""

from __future__ import annotations

import asyncio

import orjson
import pytest
from starlette.types import Message, Receive, Scope, Send

from gateway.transports.deadline import BODY_WHOLE, BodyDeadline

SCOPE: Scope = {"type": "http", "method": "POST", "path": "/", "headers": []}


async def echo(scope: Scope, receive: Receive, send: Send) -> None:
    """Reads the whole body, then answers it; tells nothing when the client went away."""
    body = b""
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            await send({"type": "http.response.start", "status": 500, "headers": []})  # dropped after a 408
            return
        body += message.get("body", b"")
        if not message.get("more_body", False):
            break
    await send({"type": "http.response.start", "status": 200, "headers": []})
    await send({"type": "http.response.body", "body": body})


def parts(*chunks: bytes, stall: bool = False) -> Receive:
    queue = list(chunks)

    async def receive() -> Message:
        if not queue:
            await asyncio.Event().wait()  # a client that never sends the rest
        chunk = queue.pop(0)
        return {"type": "http.request", "body": chunk, "more_body": bool(queue) or stall}

    return receive


async def run(app: BodyDeadline, receive: Receive, scope: Scope = SCOPE) -> list[Message]:
    sent: list[Message] = []

    async def send(message: Message) -> None:
        sent.append(message)

    await app(scope, receive, send)
    return sent


async def test_a_whole_body_passes_untouched() -> None:
    sent = await run(BodyDeadline(echo, 5), parts(b"ab", b"cd"))
    assert [m.get("status") for m in sent] == [200, None] and sent[1]["body"] == b"abcd"


async def test_a_body_that_stalls_gets_408_in_the_error_shape_and_the_apps_answer_is_dropped() -> None:
    loop = asyncio.get_running_loop()
    started = loop.time()
    sent = await asyncio.wait_for(run(BodyDeadline(echo, 0.2), parts(b"ab", stall=True)), 5)
    assert loop.time() - started < 2  # the deadline, plus at most one sweep
    assert [m.get("status") for m in sent] == [408, None]
    assert dict(sent[0]["headers"])[b"connection"] == b"close"
    assert orjson.loads(sent[1]["body"])["error"]["code"] == "REQUEST_TIMEOUT"


async def test_a_cancelled_request_stays_cancelled_and_leaves_nothing_behind() -> None:
    app = BodyDeadline(echo, 30)
    task = asyncio.create_task(run(app, parts(b"ab", stall=True)))
    await asyncio.sleep(0.05)
    task.cancel()  # as a server does when its client goes away: not a timeout
    with pytest.raises(asyncio.CancelledError):
        await task
    assert app._reading == {}


async def test_a_body_the_server_in_front_says_is_whole_is_not_timed() -> None:
    """The shared port sets BODY_WHOLE once it holds the whole body (tests/runtime/test_shared_port.py): the
    app's reads are then the server's replay, and the deadline is not this middleware's to keep."""
    app = BodyDeadline(echo, 0.2)
    task = asyncio.create_task(run(app, parts(b"ab", stall=True), {**SCOPE, BODY_WHOLE: True}))
    await asyncio.sleep(0.05)
    assert app._reading == {}  # nothing listed for the sweeper
    await asyncio.sleep(1.5)  # past the deadline and a sweep
    assert not task.done()  # no 408
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task

"""The request pipeline: a call passes through stages, each of which may answer it or pass it on.

A stage is ``async (call, next) -> Reply``, the shape of ASGI middleware but over a parsed call, so
authentication, limits and billing plug in as stages without the transports knowing of them::

    JSON-RPC over HTTP:  boundary → [auth] → parse+plan → [admission/billing] → forward

Transports (HTTP, WebSocket, MCP, gRPC) build a :class:`Call` and render the :class:`Reply`.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import orjson

from gateway.errors import ProxyError, internal_error
from gateway.jsonrpc import RpcPayload

log = logging.getLogger(__name__)


def new_request_id() -> str:
    """32 random hex digits, as ``uuid4().hex`` looks, at a third of its cost."""
    return os.urandom(16).hex()


@dataclass(slots=True)
class Call:
    """One inbound request as the stages see it."""

    method: str  # HTTP method
    path: str
    headers: Mapping[str, str]  # lower-case names
    query: Mapping[str, str]
    body: bytes
    request_id: str = field(default_factory=new_request_id)
    transport: str = "http"
    identity: Any = None  # set by the auth stage
    payload: RpcPayload | None = None  # set by the parse stage
    response_headers: dict[str, str] = field(default_factory=dict)


@dataclass(slots=True)
class Reply:
    status: int
    body: bytes
    headers: dict[str, str] = field(default_factory=dict)


Handler = Callable[[Call], Awaitable[Reply]]
Stage = Callable[[Call, Handler], Awaitable[Reply]]


def compose(stages: Sequence[Stage], endpoint: Handler) -> Handler:
    """Chain ``stages`` in front of ``endpoint``; the first stage sees the call first."""
    handler = endpoint
    for stage in reversed(stages):
        handler = _bind(stage, handler)
    return handler


def _bind(stage: Stage, next_handler: Handler) -> Handler:
    # A plain function handing back the stage's own awaitable: no extra coroutine per stage per call.
    def handler(call: Call) -> Awaitable[Reply]:
        return stage(call, next_handler)

    return handler


def json_reply(status: int, document: Any, headers: dict[str, str] | None = None) -> Reply:
    return Reply(status, orjson.dumps(document), headers or {})


def render_proxy_error(call: Call, exc: ProxyError) -> Reply:
    """JSON-RPC endpoints answer JSON-RPC errors where the spec gives a code, else the HTTP error body."""
    headers = {**call.response_headers, **exc.headers}
    if exc.rpc_code is not None and call.transport == "jsonrpc":
        item_id = call.payload.items[0].id if call.payload and not call.payload.is_batch else None
        body = {"jsonrpc": "2.0", "id": item_id, "error": exc.rpc_error().to_json()}
        return json_reply(exc.status, body, headers)
    return json_reply(exc.status, exc.http_body(call.request_id), headers)


async def error_boundary(call: Call, next_handler: Handler) -> Reply:
    """Outermost stage: every failure leaves in a documented shape, never as a bare 500."""
    try:
        reply = await next_handler(call)
    except ProxyError as exc:
        reply = render_proxy_error(call, exc)
    except Exception:
        log.exception("unhandled error in request %s", call.request_id)
        reply = render_proxy_error(call, internal_error())
    reply.headers.setdefault("X-Request-Id", call.request_id)
    return reply

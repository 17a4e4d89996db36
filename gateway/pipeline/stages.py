"""The request pipeline: a call passes through stages, each of which may answer it or pass it on.

A stage is ``async (call, next) -> Reply``, the shape of ASGI middleware but over a parsed call, so
authentication, limits and billing plug in as stages without the transports knowing of them::

    JSON-RPC:  error_boundary → auth → credit headers → readiness → parse+plan → metering → forward

The contract with the transports (HTTP, WebSocket, gRPC, MCP): a transport builds a :class:`Call`
(its wire, how errors must be rendered, and the credentials it extracted the way that wire carries
them), runs a handler, and renders the :class:`Reply`. Stages never ask which transport they serve.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

import orjson

from gateway.base import metrics
from gateway.core.credentials import Credentials
from gateway.core.errors import ProxyError, ReplyStyle, internal_error, service_unavailable
from gateway.core.identity import Identity
from gateway.core.jsonrpc import RpcPayload, request_id_of
from gateway.storage.errors import StoreUnavailable

log = logging.getLogger(__name__)

REQUEST_ID_HEADER = "X-Request-Id"
#: The node (by its name in the pool) that answered a forwarded call (docs/api.md, Several nodes).
UPSTREAM_HEADER = "X-Upstream"


#: Request ids drawn from the OS per system call: one ``os.urandom`` per call was a system call on
#: every request (1-2 µs of a busy replica's CPU).
_IDS_PER_DRAW = 256
_ids: list[str] = []
os.register_at_fork(after_in_child=_ids.clear)  # a forked child never hands out its parent's ids


def new_request_id() -> str:
    """32 random hex digits (from ``os.urandom``), as ``uuid4().hex`` looks, at a fraction of its cost."""
    if not _ids:
        drawn = os.urandom(16 * _IDS_PER_DRAW).hex()
        _ids.extend(drawn[i : i + 32] for i in range(0, len(drawn), 32))
    return _ids.pop()


class Wire(StrEnum):
    """Where the call arrived."""

    HTTP = "http"
    WEBSOCKET = "ws"
    GRPC = "grpc"
    MCP = "mcp"


@dataclass(slots=True)
class Call:
    """One inbound request as the stages see it."""

    verb: str  # the HTTP method (transports without one use "POST"); the signed message includes it
    path: str
    headers: Mapping[str, str]  # lower-case names
    query: Mapping[str, str]
    body: bytes
    credentials: Credentials = field(default_factory=Credentials)  # as the wire carried them
    client: str | None = None  # the peer's address (per-address limits decide whom it stands for)
    wire: Wire = Wire.HTTP
    style: ReplyStyle = ReplyStyle.REST
    request_id: str = field(default_factory=new_request_id)
    identity: Identity | None = None  # set by the auth stage
    payload: RpcPayload | None = None  # set by the parse stage
    response_headers: dict[str, str] = field(default_factory=dict)  # stages' headers for the reply

    def authenticated(self) -> Identity:
        """The caller's identity; for endpoints mounted behind the auth stage."""
        if self.identity is None:
            raise RuntimeError(f"{self.path} must be mounted behind the auth stage")
        return self.identity

    def usage_id(self, index: int) -> str:
        """The request id a JSON-RPC item's usage record carries: the call's, and in a batch ``:<index>``."""
        if self.payload is not None and self.payload.is_batch:
            return f"{self.request_id}:{index}"
        return self.request_id


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
    """A refusal in the call's reply style (or the error's own); the error's headers win over the stages'."""
    headers = {**call.response_headers, **exc.headers}
    if exc.rpc_code is not None and (exc.style or call.style) is ReplyStyle.JSONRPC and not _rest_400(call, exc):
        body: dict[str, Any] = {"jsonrpc": "2.0", "id": _item_id(call), "error": exc.rpc_error().to_json()}
        body.update(exc.extra_body)
        return json_reply(exc.status, body, headers)
    return json_reply(exc.status, exc.http_body(call.request_id), headers)


def _rest_400(call: Call, exc: ProxyError) -> bool:
    """A 400 is the HTTP error body ``INVALID_REQUEST`` on the JSON-RPC routes too (the interface's table
    gives it no JSON-RPC code; docs/api.md, Errors); a WebSocket frame stays a JSON-RPC error."""
    return exc.status == 400 and exc.style is None and call.wire is not Wire.WEBSOCKET


def _item_id(call: Call) -> Any:
    """The id to answer a single request with: parsed already, or read from the body (an early refusal)."""
    if call.payload is not None:
        return None if call.payload.is_batch else call.payload.items[0].id
    return request_id_of(call.body)


async def error_boundary(call: Call, next_handler: Handler) -> Reply:
    """Outermost stage: every failure leaves in a documented shape, never as a bare 500, and every
    reply carries the stages' headers and the call's one ``X-Request-Id``."""
    started = time.perf_counter()
    try:
        reply = await next_handler(call)
    except ProxyError as exc:
        metrics.refused(exc.status, exc.constant)
        reply = render_proxy_error(call, exc)
    except StoreUnavailable as exc:
        reply = render_proxy_error(call, service_unavailable(f"{exc.what} is unavailable; retry shortly", 5))
    except Exception:
        log.exception("unhandled error in request %s", call.request_id)
        reply = render_proxy_error(call, internal_error())
    else:
        headers = reply.headers
        if not headers:  # the common reply: one C call copies the stages' (a metered call's five)
            headers.update(call.response_headers)
        else:  # the reply's own headers win
            for name, value in call.response_headers.items():
                headers.setdefault(name, value)
    reply.headers[REQUEST_ID_HEADER] = call.request_id
    metrics.call_done(call.wire, call.payload, reply.status, started)
    return reply


__all__ = ["Call", "Handler", "Reply", "ReplyStyle", "Stage", "Wire", "compose", "error_boundary", "json_reply"]

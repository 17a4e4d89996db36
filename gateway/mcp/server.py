"""The MCP transport: ``/mcp``, the Model Context Protocol over streamable HTTP, whose tools are the
JSON-RPC surface (catalog: :mod:`gateway.mcp.tools`).

The protocol is the official ``mcp`` SDK's: its low-level ``Server`` answers ``initialize``,
``notifications/initialized``, ``ping``, ``tools/list`` and ``tools/call``, and its
``StreamableHTTPSessionManager`` (stateless: any replica answers any request, nothing to route by
session) parses the messages, answers protocol faults as JSON-RPC errors and writes the response:
one JSON object when the client accepts ``application/json``, an SSE stream when it accepts only
``text/event-stream``. What is hand-written here, and why the SDK's own does not fit:

- **Credentials before MCP.** :class:`McpTransport` authenticates the HTTP request first, through the
  transports' one entry (:mod:`gateway.callers.entry`, JSON-RPC's own authentication), so a request without (or
  with bad) credentials gets exactly what ``POST /`` gets (the 402 with its ``PAYMENT-REQUIRED`` terms,
  the 401), never an MCP answer. The SDK's auth is OAuth bearer tokens, which is not this gateway's
  identity. A wallet signature signs the HTTP body, which is the MCP message: it is checked (and its
  nonce claimed) once, here.
- **A tool call is a JSON-RPC call.** The handler makes the tool's JSON-RPC request the body of a
  :class:`Call` with the HTTP request's request id, and runs it through the entry's session: JSON-RPC's
  stages after auth (credit headers, readiness, parse and plan, metering, forward): the same prices,
  limits, refunds and errors, no second implementation. A refusal (402, 429, -32602, a node error)
  becomes a tool result with ``isError`` and the error (its ``data`` included: the deposit terms of a
  402) as JSON text, which an agent can act on.
- **The call's headers on the HTTP response.** The SDK writes the response itself, from another
  task. The wrapper puts a per-request :class:`Exchange` in a context variable (the SDK's tasks run
  in copies of the request's context, so they see the same object), the tool handler stores the
  reply's headers in it, and the wrapper adds them to ``http.response.start``, which it holds back
  until the first body message (a JSON answer is written whole after the handler ends; on SSE the
  first event is normally the answer itself).
- **Versions.** MCP's: ``initialize`` echoes ``2025-03-26`` or ``2025-06-18`` and answers any
  other with ``2025-06-18`` (the SDK would echo every revision it knows, ``2025-11-25`` included, and
  answer unknown ones with that); the SDK's client accepts it. A later request whose
  ``MCP-Protocol-Version`` header names another version gets 400, as the transport spec says (the
  SDK would route it to its 2026 stateless era, which this endpoint does not offer).
- **GET and DELETE** answer 405 (allowed by the transport spec): stateless, there is no session to
  end and no server-initiated message to stream.
- **Content-Type** other than ``application/json`` gets a JSON-RPC-shaped 415 here (the SDK answers
  it with a plain-text 400).
- **Origin.** MCP's transport rule against DNS rebinding: a request whose ``Origin`` header is not
  the gateway's own (``http://127.0.0.1``, ``localhost`` or ``[::1]`` at its port) nor one of
  ``mcp_allowed_origins`` gets 403 before anything else runs. The SDK's own check also pins the
  ``Host`` header to a list, which a gateway served under any name cannot give it.
- **Logging.** ``logging/setLevel`` is kept per caller (:mod:`gateway.mcp.logs`: the transport is
  stateless); a caller that set a level and accepts SSE gets its tool calls answered as an SSE stream
  carrying ``notifications/message`` at that level or above: each call's billing note (``info``) or
  its refusal (``error``). In the SDK's JSON mode notifications would be dropped.
- **Bounds.** The body is read here with JSON-RPC's limit (``RPC_MAX_BODY_BYTES``, 413 above it),
  before any stage runs.
"""

from __future__ import annotations

import contextvars
from collections.abc import AsyncIterator, Mapping
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

import mcp_types as types
import orjson
from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
from mcp.server.lowlevel import Server
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from mcp.shared.exceptions import MCPError
from starlette.types import Message, Receive, Scope, Send

from gateway.app.replica import GatewayApp
from gateway.callers.entry import Entry, EntrySession
from gateway.core.errors import ReplyStyle
from gateway.mcp.logs import LogLevels
from gateway.mcp.tools import BY_NAME, TOOLS, ToolArgumentError, jsonrpc_request
from gateway.pipeline.http import (
    RPC_MAX_BODY_BYTES,
    BodyTooLarge,
    call_from_scope,
    receive_body,
    send_reply,
    too_large_reply,
)
from gateway.pipeline.stages import Call, Reply, Wire, json_reply

MCP_PATH = "/mcp"
#: The MCP revisions this endpoint speaks (MCP's), oldest first; the last is the answer to others.
SUPPORTED_VERSIONS = ("2025-03-26", "2025-06-18")
LATEST_VERSION = SUPPORTED_VERSIONS[-1]
PROTOCOL_VERSION_HEADER = "mcp-protocol-version"
#: Revisions without ``structuredContent`` (the header's absence means 2025-03-26).
_UNSTRUCTURED_VERSIONS = frozenset({"2024-11-05", "2025-03-26"})
SERVER_NAME = "solana-credit-gateway"
INSTRUCTIONS = (
    "Solana JSON-RPC through a prepaid, credit-metered gateway. Every tool call is one JSON-RPC call, "
    "billed at its method's price; `rpc` reaches any method. A refused call (no credits, rate limit, "
    "bad params) is a tool error whose JSON says why and what to do (e.g. the deposit terms)."
)
#: Headers of the HTTP response the SDK sets itself: the pipeline's reply never overrides them.
_SDK_OWNED = frozenset({"content-type", "content-length"})
#: The loopback names a page served by the gateway itself has in its Origin.
_OWN_HOSTS = ("127.0.0.1", "localhost", "[::1]")
LOGGER_NAME = "gateway"


def own_origins(port: int) -> frozenset[str]:
    """The gateway's own origins at ``port`` (a page it serves may call ``/mcp``)."""
    return frozenset(f"{scheme}://{host}:{port}" for scheme in ("http", "https") for host in _OWN_HOSTS)


@dataclass(slots=True)
class Exchange:
    """One HTTP request to ``/mcp``: the authenticated call, its entry's session, and the headers its
    response must carry."""

    call: Call
    entered: EntrySession
    headers: dict[str, str] = field(default_factory=dict)


_exchange: contextvars.ContextVar[Exchange | None] = contextvars.ContextVar("mcp_exchange", default=None)


async def _negotiate_version(ctx: ServerRequestContext[Any, Any], call_next: CallNext) -> HandlerResult:
    """``initialize`` answers the requested revision if this endpoint speaks it, else its latest."""
    result = await call_next(ctx)
    if ctx.method == "initialize" and isinstance(result, dict):
        requested = (ctx.params or {}).get("protocolVersion")
        result["protocolVersion"] = requested if requested in SUPPORTED_VERSIONS else LATEST_VERSION
    return result


def tool_result(reply: Reply, structured: bool = True) -> types.CallToolResult:
    """A pipeline reply as a tool result: the JSON-RPC ``result``, or ``isError`` with the error.
    ``structured``: also as ``structuredContent`` (new in 2025-06-18; always in the text too)."""
    try:
        document = orjson.loads(reply.body)
    except orjson.JSONDecodeError:
        document = None
    if isinstance(document, dict) and "result" in document and "error" not in document:
        result = document["result"]
        return types.CallToolResult(
            content=[types.TextContent(type="text", text=orjson.dumps(result).decode())],
            structured_content={"result": result} if structured else None,
        )
    if isinstance(document, dict):
        detail = {k: v for k, v in document.items() if k not in ("jsonrpc", "id")}
    else:
        detail = {"body": reply.body.decode("utf-8", "replace")}
    detail["httpStatus"] = reply.status
    error = detail.get("error")
    message = error.get("message") if isinstance(error, dict) else None
    summary = f"Refused (HTTP {reply.status}): {message or 'see the error below'}"
    return types.CallToolResult(
        content=[
            types.TextContent(type="text", text=summary),
            types.TextContent(type="text", text=orjson.dumps(detail).decode()),
        ],
        structured_content=detail if structured else None,
        is_error=True,
    )


def _argument_error(message: str, structured: bool) -> types.CallToolResult:
    """Arguments that make no request: refused free, shaped like the pipeline's -32602."""
    body = orjson.dumps({"jsonrpc": "2.0", "id": None, "error": {"code": -32602, "message": message}})
    return tool_result(Reply(400, body), structured)


class McpTransport:
    """ASGI app for ``/mcp``; :meth:`run` must be entered in the app's lifespan."""

    def __init__(self, gw: GatewayApp) -> None:
        origins = gw.settings.mcp_allowed_origins
        self._any_origin = "*" in origins
        configured = frozenset(origin.rstrip("/").lower() for origin in origins)
        self._origins = configured | own_origins(gw.settings.port)
        self._entry: Entry = gw.entry
        self.log_levels = LogLevels()
        self.server: Server[Any] = Server(
            SERVER_NAME,
            version="0.1.0",
            instructions=INSTRUCTIONS,
            on_list_tools=self._list_tools,
            on_call_tool=self._call_tool,
        )
        self.server.middleware.append(_negotiate_version)
        # Registered here rather than as on_set_logging_level, whose constructor overload warns that the
        # 2026-07-28 revision drops logging; the revisions served here (2025-03-26, 2025-06-18) have it.
        self.server.add_request_handler("logging/setLevel", types.SetLevelRequestParams, self._set_level)
        self._json = StreamableHTTPSessionManager(
            self.server, json_response=True, stateless=True, max_request_body_size=RPC_MAX_BODY_BYTES
        )
        self._sse = StreamableHTTPSessionManager(
            self.server, json_response=False, stateless=True, max_request_body_size=RPC_MAX_BODY_BYTES
        )

    @asynccontextmanager
    async def run(self) -> AsyncIterator[None]:
        async with AsyncExitStack() as stack:
            await stack.enter_async_context(self._json.run())
            await stack.enter_async_context(self._sse.run())
            yield

    async def _list_tools(
        self, ctx: ServerRequestContext[Any, Any], params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        return types.ListToolsResult(
            tools=[types.Tool(name=t.name, description=t.description, input_schema=t.input_schema) for t in TOOLS]
        )

    async def _call_tool(
        self, ctx: ServerRequestContext[Any, Any], params: types.CallToolRequestParams
    ) -> types.CallToolResult:
        exchange = _exchange.get()
        if exchange is None:  # a request that did not come through __call__: nothing to bill it to
            raise MCPError(types.INTERNAL_ERROR, "tool call outside an authenticated request")
        tool = BY_NAME.get(params.name)
        if tool is None:
            raise MCPError(types.INVALID_PARAMS, f"Unknown tool: {params.name}")
        structured = ctx.session.protocol_version not in _UNSTRUCTURED_VERSIONS
        try:
            method, rpc_params = tool.request(params.arguments or {})
        except ToolArgumentError as exc:
            return _argument_error(str(exc), structured)
        http = exchange.call
        call = Call(
            "POST",
            http.path,
            http.headers,
            http.query,
            orjson.dumps(jsonrpc_request(method, rpc_params)),
            client=http.client,
            wire=Wire.MCP,
            style=ReplyStyle.JSONRPC,
            request_id=http.request_id,
        )
        reply = await exchange.entered.rpc(call)
        exchange.headers.update(_own(reply.headers))
        result = tool_result(reply, structured)
        await self._log_call(ctx, exchange, method, reply, result)
        return result

    async def _set_level(
        self, ctx: ServerRequestContext[Any, Any], params: types.SetLevelRequestParams
    ) -> types.EmptyResult:
        exchange = _exchange.get()
        if exchange is None or exchange.call.identity is None:
            raise MCPError(types.INTERNAL_ERROR, "logging/setLevel outside an authenticated request")
        self.log_levels.set(exchange.call.identity.pubkey, params.level)
        return types.EmptyResult()

    async def _log_call(
        self,
        ctx: ServerRequestContext[Any, Any],
        exchange: Exchange,
        method: str,
        reply: Reply,
        result: types.CallToolResult,
    ) -> None:
        """The call's billing note (``info``) or its refusal (``error``), if the caller asked for that level."""
        identity = exchange.call.identity
        level: types.LoggingLevel = "error" if result.is_error else "info"
        if identity is None or not self.log_levels.wants(identity.pubkey, level):
            return
        headers = {k.lower(): v for k, v in reply.headers.items()}
        note: dict[str, Any] = {"method": method, "httpStatus": reply.status, "requestId": exchange.call.request_id}
        if "x-credits-remaining" in headers:
            note["creditsRemaining"] = int(headers["x-credits-remaining"])
        if result.is_error:
            note["error"] = result.content[0].text if isinstance(result.content[0], types.TextContent) else None
        params = types.LoggingMessageNotificationParams(level=level, data=note, logger=LOGGER_NAME)
        notification = types.LoggingMessageNotification(params=params)
        await ctx.session.send_notification(notification, related_request_id=ctx.request_id)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            body = await receive_body(receive, RPC_MAX_BODY_BYTES)
        except BodyTooLarge:
            await send_reply(send, too_large_reply(RPC_MAX_BODY_BYTES))
            return
        if body is None:
            return  # the client went away before sending its whole body
        call = call_from_scope(scope, body, ReplyStyle.JSONRPC)
        call.wire = Wire.MCP
        origin = call.headers.get("origin")
        if origin is not None and not self._allowed_origin(origin.rstrip("/").lower(), scope):
            message = f"Forbidden: Origin {origin!r} may not call /mcp (the gateway's mcp_allowed_origins)"
            await send_reply(send, json_reply(403, _rpc_error(-32000, message)))
            return
        reply, entered = await self._entry.admit(call)
        if entered is None:  # refused: exactly JSON-RPC's answer
            await send_reply(send, reply)
            return
        try:
            await self._serve(scope, body, receive, send, Exchange(call, entered, _own(reply.headers)))
        finally:
            entered.close()

    def _allowed_origin(self, origin: str, scope: Scope) -> bool:
        """A configured origin, or the gateway's own: at its port, or at the port this request came in on
        (a gateway served on another port than ``port``, as the tests' and a proxied replica's)."""
        if self._any_origin or origin in self._origins:
            return True
        server = scope.get("server")
        return server is not None and origin in own_origins(server[1])

    async def _serve(self, scope: Scope, body: bytes, receive: Receive, send: Send, exchange: Exchange) -> None:
        """An authenticated request: refused here, or handed to the SDK."""
        call = exchange.call
        refusal = _refusal(scope["method"], call.headers)
        if refusal is not None:
            refusal.headers.update(exchange.headers)
            await send_reply(send, refusal)
            return
        manager = self._json
        accept = call.headers.get("accept", "")
        logging_to = call.identity is not None and self.log_levels.is_set(call.identity.pubkey)
        if not _accepts_json(accept) or (logging_to and "text/event-stream" in accept.lower()):
            # SSE asked for, or the caller set a log level (its notifications ride the SSE stream);
            # the SDK's SSE mode wants both types listed
            manager = self._sse
            scope = {**scope, "headers": _with_accept(scope["headers"], b"application/json, text/event-stream")}
        token = _exchange.set(exchange)
        try:
            await manager.handle_request(scope, _replay(body, receive), _with_headers(send, exchange))
        finally:
            _exchange.reset(token)


def _refusal(method: str, headers: Mapping[str, str]) -> Reply | None:
    """What this endpoint refuses before the SDK sees it: GET/DELETE, a body that is not JSON, a version
    it does not speak."""
    if method != "POST":
        return json_reply(405, _rpc_error(-32000, "Method Not Allowed: POST only (stateless)"), {"Allow": "POST"})
    if not headers.get("content-type", "").lower().startswith("application/json"):
        # the SDK's own answer to this is a plain-text 400; every MCP error here is JSON-RPC shaped
        return json_reply(415, _rpc_error(-32600, "Unsupported Media Type: Content-Type must be application/json"))
    version = headers.get(PROTOCOL_VERSION_HEADER)
    if version is not None and version not in SUPPORTED_VERSIONS:
        message = f"Bad Request: unsupported MCP-Protocol-Version {version!r}; supported: {list(SUPPORTED_VERSIONS)}"
        return json_reply(400, _rpc_error(-32600, message))
    return None


def _own(headers: Mapping[str, str]) -> dict[str, str]:
    """The pipeline's headers the HTTP response carries (not those the SDK sets itself)."""
    return {k: v for k, v in headers.items() if k.lower() not in _SDK_OWNED}


def _rpc_error(code: int, message: str) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": None, "error": {"code": code, "message": message}}


def _accepts_json(accept: str) -> bool:
    types_ = {part.split(";")[0].strip().lower() for part in accept.split(",")}
    return bool(types_ & {"application/json", "application/*", "*/*"}) or "text/event-stream" not in types_


def _with_accept(headers: list[tuple[bytes, bytes]], value: bytes) -> list[tuple[bytes, bytes]]:
    return [*((k, v) for k, v in headers if k.lower() != b"accept"), (b"accept", value)]


def _replay(body: bytes, receive: Receive) -> Receive:
    """A ``receive`` that gives the already-read body once, then the client's later messages."""
    sent = False

    async def replay() -> Message:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()

    return replay


def _with_headers(send: Send, exchange: Exchange) -> Send:
    """A ``send`` that adds the exchange's headers to the response, holding its start back until the
    first body message so that headers stored meanwhile (the tool call's) are on it."""
    start: Message | None = None

    async def send_with_headers(message: Message) -> None:
        nonlocal start
        if message["type"] == "http.response.start":
            start = message
            return
        if start is not None:
            held, start = start, None
            extra = [(k.lower().encode("latin-1"), v.encode("latin-1")) for k, v in exchange.headers.items()]
            names = {k for k, _ in extra}
            kept = [(k, v) for k, v in held.get("headers", ()) if k.lower() not in names]
            await send({**held, "headers": [*kept, *extra]})
        await send(message)

    return send_with_headers

"""The header rules of ServeEdge (through Ray they are covered by tests/integration)."""

from __future__ import annotations

import re

from starlette.types import Message, Receive, Scope, Send

from gateway.pipeline.http import EDGE_REQUEST_ID, call_from_scope
from gateway.transports.ray_edge import DISCONNECT_DISABLED, ServeEdge, drop_last, without_control_headers

EDGE_ID = b"0f1e2d3c4b5a69788796a5b4c3d2e1f0"


async def receive() -> Message:
    """An empty request body: what every app below is given to read."""
    return {"type": "http.request", "body": b""}


async def send(message: Message) -> None:
    """The answer, which no test below reads."""
    return None


def test_the_last_request_id_goes_and_the_first_stays() -> None:
    headers = [(b"x-request-id", b"ours"), (b"content-type", b"application/json"), (b"x-request-id", b"rays")]
    assert drop_last(headers, b"x-request-id") == [(b"x-request-id", b"ours"), (b"content-type", b"application/json")]


def test_a_lone_request_id_goes_and_nothing_else_changes() -> None:
    assert drop_last([(b"X-Request-ID", b"rays"), (b"a", b"1")], b"x-request-id") == [(b"a", b"1")]
    assert drop_last([(b"a", b"1")], b"x-request-id") == [(b"a", b"1")]


def test_serve_control_headers_are_stripped_and_others_kept() -> None:
    headers = [
        (b"x-request-timeout-seconds", b"0.2"),
        (b"X-Request-Disconnect-Disabled", b"?1"),
        (b"serve_multiplexed_model_id", b"m"),
        (b"serve-multiplexed-model-id", b"m"),
        (b"x-session-id", b"s"),
        (b"x-request-id", b"client-chosen"),
        (b"x-api-key", b"srpc_live_x"),
        (b"content-type", b"application/json"),
    ]
    assert without_control_headers(headers) == [(b"x-api-key", b"srpc_live_x"), (b"content-type", b"application/json")]


async def test_the_app_never_sees_them() -> None:
    seen: list[list[tuple[bytes, bytes]]] = []

    async def app(scope: Scope, receive: Receive, send: Send) -> None:
        seen.append(scope["headers"])

    for kind in ("http", "websocket"):
        scope = {"type": kind, "headers": [(b"x-request-timeout-seconds", b"0.2"), (b"host", b"h")]}
        await ServeEdge(app)(scope, receive, send)
    assert seen == [[(b"host", b"h"), DISCONNECT_DISABLED], [(b"host", b"h")]]


async def test_serve_is_told_to_run_each_http_request_in_place() -> None:
    """Serve skips its per-request tasks (its disconnect watcher and the request's own) only on the
    edge's ``?1``: a client's value of the header, whatever it is, never reaches Serve."""
    seen: list[list[tuple[bytes, bytes]]] = []

    async def app(scope: Scope, receive: Receive, send: Send) -> None:
        seen.append(scope["headers"])

    for value in (b"?0", b"?1", b"no"):
        headers = [(b"X-Request_Disconnect-Disabled", value), (b"x-request-timeout_seconds", b"1")]
        await ServeEdge(app)({"type": "http", "headers": headers}, receive, send)
    assert seen == [[DISCONNECT_DISABLED]] * 3


async def _client_seen(
    edge: ServeEdge, headers: list[tuple[bytes, bytes]]
) -> tuple[object, list[tuple[bytes, bytes]], str | None]:
    """The client address, headers and edge request id the app saw."""
    seen: list[Scope] = []

    async def app(scope: Scope, receive: Receive, send: Send) -> None:
        seen.append(scope)

    await edge.__class__(app, edge_secret=edge.edge_secret.decode() if edge.edge_secret else "")(
        {"type": "http", "headers": headers, "client": ("127.0.0.1", 5000)}, receive, send
    )
    return seen[0]["client"], [h for h in seen[0]["headers"] if h != DISCONNECT_DISABLED], seen[0].get(EDGE_REQUEST_ID)


async def test_the_edge_names_the_client_and_the_request_id_only_with_the_secret() -> None:
    edge = ServeEdge(lambda *_: None, edge_secret="s3cret")  # type: ignore[arg-type]
    vouched = [
        (b"X-Gateway-Client", b"203.0.113.7"),
        (b"x-gateway-edge", b"s3cret"),
        (b"X-Gateway-Request-Id", EDGE_ID),
        (b"host", b"h"),
    ]
    assert await _client_seen(edge, vouched) == (("203.0.113.7", 0), [(b"host", b"h")], EDGE_ID.decode())
    forged = [
        (b"x-gateway-client", b"203.0.113.7"),
        (b"x-gateway-edge", b"guess"),
        (b"x-gateway-request-id", EDGE_ID),
        (b"host", b"h"),
    ]
    assert await _client_seen(edge, forged) == (("127.0.0.1", 5000), [(b"host", b"h")], None)
    unvouched = [(b"x-gateway-client", b"203.0.113.7"), (b"x-gateway-request-id", EDGE_ID)]
    assert await _client_seen(edge, unvouched) == (("127.0.0.1", 5000), [], None)


async def test_a_vouched_request_id_is_taken_only_in_the_gateways_shape() -> None:
    """32 lower-case hex digits, as HAProxy's rule makes them and the gateway's own are: anything else
    (which no edge of ours sends) leaves the call its own id rather than put it in logs and records."""
    edge = ServeEdge(lambda *_: None, edge_secret="s3cret")  # type: ignore[arg-type]
    for odd in (EDGE_ID[:-1], EDGE_ID + b"0", EDGE_ID.upper(), b"0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0", b"x" * 32):
        headers = [(b"x-gateway-edge", b"s3cret"), (b"x-gateway-request-id", odd)]
        assert await _client_seen(edge, headers) == (("127.0.0.1", 5000), [], None), odd


async def test_without_a_secret_the_edge_headers_are_dropped_and_never_believed() -> None:
    edge = ServeEdge(lambda *_: None, edge_secret="")  # type: ignore[arg-type]
    headers = [(b"x-gateway-client", b"203.0.113.7"), (b"x-gateway-edge", b""), (b"x-gateway-request-id", EDGE_ID)]
    assert await _client_seen(edge, headers) == (("127.0.0.1", 5000), [], None)


async def test_the_http_call_takes_the_edges_request_id_and_otherwise_its_own() -> None:
    """What the HTTP transport builds behind ServeEdge: the call (its X-Request-Id, its usage records) has
    the id the edge's answers to the same request carry."""
    ids: list[str] = []

    async def app(scope: Scope, receive: Receive, send: Send) -> None:
        ids.append(call_from_scope(scope, b"").request_id)

    edge = ServeEdge(app, edge_secret="s3cret")
    for headers in ([(b"x-gateway-edge", b"s3cret"), (b"x-gateway-request-id", EDGE_ID)], []):
        scope = {"type": "http", "method": "POST", "path": "/", "headers": headers, "client": ("127.0.0.1", 5000)}
        await edge(scope, receive, send)
    assert ids[0] == EDGE_ID.decode()
    assert re.fullmatch("[0-9a-f]{32}", ids[1]) and ids[1] != ids[0]

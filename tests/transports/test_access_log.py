"""The operator's access log (setting ``access_log``): off, the app is served as it was; on, one line
per HTTP request with the client, method, path, status, duration and request id, and no credential."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest
from starlette.types import Message, Receive, Scope, Send

from gateway.app.replica import GatewayApp
from gateway.app.settings import Settings
from gateway.core.client_address import TrustedProxies
from gateway.transports.access_log import LOGGER, AccessLog, with_access_log
from gateway.transports.cors import Cors
from gateway.transports.http import build_http_app
from tests.support import service_key_settings

KEY = "srpc_live_" + "k" * 43


async def answer(scope: Scope, receive: Receive, send: Send) -> None:
    await receive()
    headers = [(b"content-type", b"application/json"), (b"x-request-id", b"req-123")]
    await send({"type": "http.response.start", "status": 402, "headers": headers})
    await send({"type": "http.response.body", "body": b"{}"})


async def broken(scope: Scope, receive: Receive, send: Send) -> None:
    raise RuntimeError("a bug")


def http_scope(path: str, query: bytes = b"", headers: list[tuple[bytes, bytes]] | None = None) -> Scope:
    return {
        "type": "http",
        "method": "POST",
        "path": path,
        "raw_path": path.encode(),
        "query_string": query,
        "headers": headers or [],
        "client": ("10.0.0.5", 5555),
    }


async def call(app: object, scope: Scope) -> list[Message]:
    sent: list[Message] = []

    async def receive() -> Message:
        return {"type": "http.request", "body": b'{"jsonrpc":"2.0"}', "more_body": False}

    async def send(message: Message) -> None:
        sent.append(message)

    await app(scope, receive, send)  # type: ignore[operator]
    return sent


def lines(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == LOGGER]


def test_off_the_app_is_served_unchanged() -> None:
    assert with_access_log(answer, False, []) is answer


async def test_one_line_per_request_without_credentials(caplog: pytest.LogCaptureFixture) -> None:
    app = with_access_log(answer, True, [])
    headers = [(b"x-api-key", KEY.encode()), (b"authorization", b"Bearer " + KEY.encode())]
    with caplog.at_level(logging.INFO, logger=LOGGER):
        sent = await call(app, http_scope("/", f"api-key={KEY}".encode(), headers))
    assert sent[0]["status"] == 402  # the answer passes untouched
    (line,) = lines(caplog)
    client, method, path, status, ms, unit, request_id = line.split(" ")
    assert (client, method, path, status, unit, request_id) == (
        "10.0.0.5",
        "POST",
        "/",
        "402",
        "ms",
        "request_id=req-123",
    )
    assert float(ms) >= 0
    assert KEY not in caplog.text and "api-key" not in caplog.text and "Bearer" not in caplog.text


async def test_behind_a_trusted_proxy_the_forwarded_client(caplog: pytest.LogCaptureFixture) -> None:
    app = AccessLog(answer, TrustedProxies.parse(["10.0.0.0/8"]), logging.getLogger(LOGGER))
    headers = [(b"x-forwarded-for", b"198.51.100.1, 203.0.113.9")]
    with caplog.at_level(logging.INFO, logger=LOGGER):
        await call(app, http_scope("/account/info\n fake line", headers=headers))
    (line,) = lines(caplog)
    assert line.startswith("203.0.113.9 POST /account/info\\x0a\\x20fake\\x20line 402 "), line  # one line always


async def test_a_request_the_app_fails_is_logged_too(caplog: pytest.LogCaptureFixture) -> None:
    app = with_access_log(broken, True, [])
    with caplog.at_level(logging.INFO, logger=LOGGER), pytest.raises(RuntimeError):
        await call(app, http_scope("/rpc"))
    (line,) = lines(caplog)
    assert line.startswith("10.0.0.5 POST /rpc 0 ") and line.endswith("request_id=-"), line


async def test_the_setting_wires_it_in_front_of_the_gateway(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    assert isinstance(
        build_http_app(GatewayApp(Settings(**service_key_settings(tmp_path), home=tmp_path))), Cors
    )  # off by default: the app itself, CORS outermost
    app = build_http_app(GatewayApp(Settings(**service_key_settings(tmp_path), home=tmp_path, access_log=True)))
    assert isinstance(app, AccessLog)
    scope = {**http_scope("/no-such-route", f"api-key={KEY}".encode()), "method": "GET"}
    with caplog.at_level(logging.INFO, logger=LOGGER):
        sent = await call(app, scope)
    assert sent[0]["status"] == 404
    (line,) = lines(caplog)
    assert line.startswith("10.0.0.5 GET /no-such-route 404 "), line
    assert KEY not in caplog.text

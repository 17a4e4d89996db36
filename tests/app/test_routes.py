"""``/app/`` over HTTP: the built page with its Content-Security-Policy, the redirect, and the 503 page a replica
without a build answers (never a 500)."""

from __future__ import annotations

import re
from pathlib import Path

import aiohttp
from starlette.applications import Starlette
from starlette.types import Message

from gateway.webui.routes import content_security_policy, webui_routes
from tests.support import RunningGateway


async def test_the_page_and_its_files_carry_a_strict_csp(
    page_gateway: RunningGateway, http: aiohttp.ClientSession
) -> None:
    host = page_gateway.url.removeprefix("http://")
    for path in ("/app/", "/app/app.js", "/app/app.css"):
        async with http.get(page_gateway.url + path) as resp:
            assert resp.status == 200, path
            csp = resp.headers["Content-Security-Policy"]
            await resp.read()
        assert "default-src 'self'" in csp and "script-src 'self';" in csp and "unsafe" not in csp
        assert f"connect-src 'self' ws://{host} wss://{host};" in csp
        assert "frame-ancestors 'none'" in csp
        assert resp.headers["X-Content-Type-Options"] == "nosniff"
    async with http.get(page_gateway.url + "/app/") as resp:
        page = await resp.text()
    scripts = re.findall(r"<script[^>]*>", page)
    assert scripts and all(" src=" in tag for tag in scripts), "no inline script: every one is a file"
    assert "http://" not in page and "https://" not in page, "nothing is fetched from elsewhere"


async def test_app_redirects_to_the_page_and_an_unknown_file_is_a_404(
    page_gateway: RunningGateway, http: aiohttp.ClientSession
) -> None:
    async with http.get(page_gateway.url + "/app", allow_redirects=False) as resp:
        assert resp.status == 308
        assert resp.headers["Location"] == "/app/"
    async with http.get(page_gateway.url + "/app/nothing-here.js") as resp:
        assert resp.status == 404
        assert (await resp.json())["error"]["code"] == "NOT_FOUND"
    async with http.post(page_gateway.url + "/app/", data=b"{}") as resp:
        assert resp.status == 405


async def test_a_missing_build_answers_503_saying_how_to_build(tmp_path: Path) -> None:
    app = Starlette(routes=webui_routes(tmp_path / "no-build"))
    status, headers, body = await get(app, "/app/")
    assert status == 503
    assert b"make up" in body and b"make webapp" in body
    assert headers["content-type"].startswith("text/html")
    assert headers["content-security-policy"] == content_security_policy("testserver")


def test_a_host_header_that_is_not_a_plain_host_is_not_put_in_the_policy() -> None:
    assert "ws:" not in content_security_policy("evil.example; script-src *")
    assert "ws://[::1]:8000" in content_security_policy("[::1]:8000")
    assert content_security_policy(None).count("connect-src 'self';") == 1


async def get(app: Starlette, path: str) -> tuple[int, dict[str, str], bytes]:
    """One GET through the ASGI app itself (no server): status, headers, body."""
    scope = {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": "GET",
        "scheme": "http",
        "path": path,
        "raw_path": path.encode(),
        "query_string": b"",
        "root_path": "",
        "headers": [(b"host", b"testserver")],
        "client": ("127.0.0.1", 1234),
        "server": ("testserver", 80),
    }
    sent: list[Message] = []

    async def receive() -> Message:
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(message: Message) -> None:
        sent.append(message)

    await app(scope, receive, send)
    start = next(m for m in sent if m["type"] == "http.response.start")
    headers = {k.decode(): v.decode() for k, v in start["headers"]}
    body = b"".join(m.get("body", b"") for m in sent if m["type"] == "http.response.body")
    return start["status"], headers, body

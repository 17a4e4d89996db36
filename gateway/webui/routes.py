"""``/app/``: the account page's built files (``webapp/dist``, made by the Makefile's webapp step), same origin
as the API.

Hand-written around Starlette's StaticFiles because every answer needs the page's Content-Security-Policy and
a replica whose build is missing must say how to build (503), not fail (docs/dashboard.md).
"""

from __future__ import annotations

import re
from pathlib import Path

from starlette.requests import Request
from starlette.responses import HTMLResponse, RedirectResponse, Response
from starlette.routing import BaseRoute, Mount, Route
from starlette.staticfiles import StaticFiles
from starlette.types import ASGIApp, Message, Receive, Scope, Send

APP_PATH = "/app"
#: Where ``make up`` / ``make test`` build the page: webapp/dist beside the gateway package's checkout.
BUILD_DIR = Path(__file__).resolve().parents[2] / "webapp" / "dist"

# A Host header this plain can be named in connect-src; anything else gets 'self' only.
_HOST = re.compile(r"(?:[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)*|\[[0-9A-Fa-f:.]+\])(?::[0-9]{1,5})?")

MISSING_BUILD = """<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>Account page not built</title></head>
<body><h1>The account page is not built on this server</h1>
<p>Its files are built from <code>webapp/</code> in the repository, not committed. Run <code>make up</code>
(or <code>make webapp</code>) in the checkout this gateway runs from, then reload.</p>
<p>The API itself works: see <a href="/docs">/docs</a>.</p></body></html>
"""


def content_security_policy(host: str | None) -> str:
    """Only this origin's files; the API and its WebSocket on the same host; no inline script or style."""
    sockets = f" ws://{host} wss://{host}" if host and _HOST.fullmatch(host) else ""
    return (
        "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
        f"connect-src 'self'{sockets}; object-src 'none'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
    )


def page_headers(host: str | None) -> dict[str, str]:
    return {
        "Content-Security-Policy": content_security_policy(host),
        "X-Content-Type-Options": "nosniff",
        "Referrer-Policy": "no-referrer",
        "Cache-Control": "no-cache",  # revalidated (ETag) so a rebuilt page is picked up at once
    }


class PageFiles:
    """StaticFiles over the build, each answer with :func:`page_headers`; a 503 page when there is no build."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.files = StaticFiles(directory=directory, html=True, check_dir=False)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        headers = page_headers(Request(scope).headers.get("host"))
        if not (self.directory / "index.html").is_file():
            await HTMLResponse(MISSING_BUILD, 503, headers=headers)(scope, receive, send)
            return

        async def with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                raw = list(message.get("headers", []))
                raw.extend((k.lower().encode(), v.encode()) for k, v in headers.items())
                message = {**message, "headers": raw}
            await send(message)

        await self.files(scope, receive, with_headers)


def webui_routes(directory: Path = BUILD_DIR) -> list[BaseRoute]:
    """``GET /app`` -> ``/app/``, and the page's files under ``/app/``."""

    async def to_slash(request: Request) -> Response:
        return RedirectResponse(f"{APP_PATH}/", 308)

    app: ASGIApp = PageFiles(directory)
    return [Route(APP_PATH, to_slash, methods=["GET", "HEAD"]), Mount(APP_PATH, app=app, name="app")]

"""CORS: what lets a web page on another origin call the gateway and read its answers, refusals
included (docs/api.md, Use from a browser).

One ASGI middleware in front of every HTTP route, outside the body deadline, so every answer a page
can get carries the same headers: the pipeline's (200, 401, 402, 403, 429), the JSON-RPC path's
(``RpcFirst``), Starlette's (404, 405, 500) and the deadline's 408 and the 413s.

- A preflight (``OPTIONS`` with ``Origin`` and ``Access-Control-Request-Method``) is answered here,
  204, without credentials (a browser sends none in one): the methods and request headers the
  interface uses, and ``Access-Control-Max-Age``; for an origin the policy does not allow, the same
  204 without them, and the browser refuses the call.
- Any other request with an ``Origin`` the policy allows: its answer carries
  ``Access-Control-Allow-Origin`` (``*`` when any origin is allowed, else the origin itself) and
  ``Access-Control-Expose-Headers`` (every header a client reads). ``Vary: Origin`` on every answer
  to a request with an ``Origin`` and on every ``GET``/``HEAD`` answer.
- Two policies by path: ``/mcp`` answers by ``mcp_allowed_origins`` (the MCP transport's list, which
  also refuses other origins 403 against DNS rebinding: :mod:`gateway.mcp.server`), every other route
  by ``cors_allowed_origins``. No origin is refused here: an answer without the headers is what a
  browser refuses; a per-account origin rule refuses the credentialed call itself, and its refusal
  passes through here like any other (:meth:`OriginPolicy.allows` is the one service-wide decision).

Hand-written, not Starlette's ``CORSMiddleware``: Starlette's builds a ``Headers`` view of every
request and wraps every answer's ``send`` to rewrite its headers, ``Origin`` or not, while the
JSON-RPC ``POST``s (nearly all traffic, almost none from a browser) pass here after one scan of the
header list (one ad-hoc run over a trivial app on this machine, best of 5 rounds, not kept: Starlette's
+3.5 µs a call without ``Origin``, +5.3 with one; this one +0.8 either way); it takes one policy per instance where
``/mcp`` needs its own; and it answers a preflight asking for a header it does not list with a 400,
where the browser's own check says more.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from gateway.pipeline.http import route_path

#: The methods of the gateway's routes (docs/api.md).
ALLOW_METHODS = ("GET", "POST", "DELETE")
#: Request headers the interface reads, and ``solana-client`` that ``@solana/kit`` and web3.js send
#: (``content-type`` too: ``application/json`` is not one a browser sends without asking).
ALLOW_HEADERS = (
    "content-type",
    "x-api-key",
    "authorization",
    "x-pubkey",
    "x-signature",
    "x-timestamp",
    "x-nonce",
    "payment-signature",
    "x-payment",
    "solana-client",
    "mcp-protocol-version",
    "mcp-session-id",
    "last-event-id",
)
#: Response headers a client reads: credits, rate, retry, request id, cache, x402's terms and receipts.
EXPOSE_HEADERS = (
    "X-Credits-Remaining",
    "X-Credits-Low",
    "X-Ratelimit-Limit",
    "X-Ratelimit-Remaining",
    "X-Ratelimit-Reset",
    "Retry-After",
    "X-Request-Id",
    "X-Cache",
    "X-Upstream",
    "PAYMENT-REQUIRED",
    "PAYMENT-RESPONSE",
    "X-PAYMENT-RESPONSE",
)
#: How long a browser may keep a preflight's answer: Chromium's own cap (two hours).
MAX_AGE_S = 7200

_ORIGIN = b"origin"
_REQUEST_METHOD = b"access-control-request-method"
_VARY_ORIGIN = (b"vary", b"Origin")
_EXPOSE = (b"access-control-expose-headers", ", ".join(EXPOSE_HEADERS).encode())
_PREFLIGHT_ALLOWED = (
    (b"access-control-allow-methods", ", ".join(ALLOW_METHODS).encode()),
    (b"access-control-allow-headers", ", ".join(ALLOW_HEADERS).encode()),
    (b"access-control-max-age", str(MAX_AGE_S).encode()),
)
_PREFLIGHT_VARY = (b"vary", b"Origin, Access-Control-Request-Method, Access-Control-Request-Headers")


def origin_key(origin: str) -> str:
    """An origin as the policies compare it: lower-case, without a trailing ``/``."""
    return origin.rstrip("/").lower()


@dataclass(frozen=True, slots=True)
class OriginPolicy:
    """Which origins' pages may read the gateway's answers: any (``*``), or a list."""

    any_origin: bool
    origins: frozenset[str]

    @classmethod
    def parse(cls, configured: Iterable[str]) -> OriginPolicy:
        entries = [origin_key(entry) for entry in configured]
        return cls("*" in entries, frozenset(entry for entry in entries if entry != "*"))

    def allows(self, origin: str) -> bool:
        return self.any_origin or origin_key(origin) in self.origins


class Cors:
    """ASGI middleware: CORS by ``policy``, or by ``by_path``'s policy on those paths."""

    def __init__(self, app: ASGIApp, policy: OriginPolicy, by_path: Mapping[str, OriginPolicy] | None = None) -> None:
        self.app = app
        self.policy = policy
        self.by_path = dict(by_path or {})

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        origin = None
        preflight = False
        for name, value in scope["headers"]:  # ASGI: names lower-cased
            if name == _ORIGIN:
                origin = value
            elif name == _REQUEST_METHOD:
                preflight = True
        method = scope["method"]
        if origin is None:
            if method in ("GET", "HEAD"):  # an answer a cache may keep, then hand to a page that sent one
                await self.app(scope, receive, with_headers(send, (_VARY_ORIGIN,)))
            else:
                await self.app(scope, receive, send)
            return
        policy = self.by_path.get(route_path(scope), self.policy) if self.by_path else self.policy
        allowed = policy.allows(origin.decode("latin-1"))
        allow_origin = (b"access-control-allow-origin", b"*" if policy.any_origin else origin)
        if preflight and method == "OPTIONS":
            headers = [_PREFLIGHT_VARY, allow_origin, *_PREFLIGHT_ALLOWED] if allowed else [_PREFLIGHT_VARY]
            await send({"type": "http.response.start", "status": 204, "headers": headers})
            await send({"type": "http.response.body", "body": b""})
            return
        extra = (_VARY_ORIGIN, allow_origin, _EXPOSE) if allowed else (_VARY_ORIGIN,)
        await self.app(scope, receive, with_headers(send, extra))


def with_headers(send: Send, extra: tuple[tuple[bytes, bytes], ...]) -> Send:
    """``send`` adding ``extra`` to the answer's headers."""

    async def sending(message: Message) -> None:
        if message["type"] == "http.response.start":
            message["headers"] = [*message.get("headers", ()), *extra]
        await send(message)

    return sending

"""HTTP routes of the session and account endpoints, mounted beside the JSON-RPC routes.

Each route turns the request into a :class:`Call` and runs it through ``error_boundary`` (and
``AuthStage`` where the spec wants credentials), so its errors have exactly the shapes of the
JSON-RPC endpoint's. Mount with ``routes.extend(auth_routes(gw.auth))`` in ``build_http_app``.

This module does not import :mod:`gateway.transports.http` (which imports the app, which will import
the auth services): its few lines of request-to-call conversion are repeated here instead.
"""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route

from gateway.auth.endpoints import AccountEndpoints
from gateway.auth.services import AuthServices
from gateway.auth.stage import AuthStage
from gateway.errors import ProxyError
from gateway.pipeline import Call, Handler, Reply, Stage, compose, error_boundary, json_reply

MAX_BODY_BYTES = 64 * 1024  # these bodies are a few short JSON fields


class _BodyTooLarge(Exception):
    pass


async def _read_body(request: Request) -> bytes:
    chunks: list[bytes] = []
    size = 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > MAX_BODY_BYTES:
            raise _BodyTooLarge
        chunks.append(chunk)
    return b"".join(chunks)


def _response(reply: Reply) -> Response:
    return Response(reply.body, status_code=reply.status, headers=reply.headers, media_type="application/json")


def _mount(path: str, method: str, stages: list[Stage], endpoint: Handler) -> Route:
    handler = compose([error_boundary, *stages], endpoint)

    async def route(request: Request) -> Response:
        try:
            body = await _read_body(request)
        except _BodyTooLarge:
            err = ProxyError(413, "PAYLOAD_TOO_LARGE", f"request body exceeds {MAX_BODY_BYTES} bytes")
            return _response(json_reply(413, err.http_body(None)))
        call = Call(
            method=request.method,
            path=request.url.path,
            headers={k.decode("latin-1").lower(): v.decode("latin-1") for k, v in request.scope["headers"]},
            query=dict(request.query_params),
            body=body,
        )
        return _response(await handler(call))

    return Route(path, route, methods=[method])


def auth_routes(services: AuthServices) -> list[BaseRoute]:
    """``/auth/challenge``, ``/auth/verify``, ``/auth/logout`` and the ``/account/*`` reads and key creation."""
    endpoints = AccountEndpoints(services)
    any_mode = AuthStage(services, require_account=False)
    wallet_only = AuthStage(services, require_account=False, only="wallet")
    bearer_only = AuthStage(services, require_account=False, only="session")
    return [
        _mount("/auth/challenge", "POST", [], endpoints.challenge),
        _mount("/auth/verify", "POST", [], endpoints.verify),
        _mount("/auth/logout", "POST", [bearer_only], endpoints.logout),
        _mount("/account/api-key", "POST", [wallet_only], endpoints.create_api_key),
        _mount("/account/info", "GET", [any_mode], endpoints.info),
        _mount("/account/ledger", "GET", [any_mode], endpoints.ledger),
        _mount("/account/history", "GET", [any_mode], endpoints.history),
    ]

"""solana-py's ``AsyncClient`` against the gateway: credentials on every request, and the gateway's
error behind solana-py's exceptions.

solana-py raises ``SolanaRpcException`` around the HTTP error and drops the gateway's body (the
402's deposit terms, the 429's retry hint); :func:`gateway_error` digs it out as a typed error.
Per-request wallet signatures need the body of each request: :class:`WalletAuth` is an httpx
``Auth`` that signs it, and :func:`solana_client` installs it on the client's HTTP session, for
which solana-py has no public hook (it reaches ``AsyncClient._provider.session``: the tests of the
examples pin that for the solana-py version in ``pyproject.toml``).
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, Generator
from typing import Any

import httpx2
import orjson
from solana.rpc.async_api import AsyncClient

from gateway_client.errors import GatewayError, error_from_answer
from gateway_client.session import SessionAuth
from gateway_client.signer import WalletSigner


class WalletAuth(httpx2.Auth):
    """Signs each request with the wallet's four ``X-*`` headers (method, path and the exact body)."""

    requires_request_body = True

    def __init__(self, signer: WalletSigner) -> None:
        self.signer = signer

    def auth_flow(self, request: httpx2.Request) -> Generator[httpx2.Request, httpx2.Response, None]:
        request.headers.update(self.signer.headers(request.method, request.url.path, request.content))
        yield request


class SessionBearer(httpx2.Auth):
    """Sends a :class:`SessionAuth`'s token; on a 401 signs a new challenge and sends the request once more."""

    def __init__(self, session: SessionAuth) -> None:
        self.session = session

    async def async_auth_flow(self, request: httpx2.Request) -> AsyncGenerator[httpx2.Request, httpx2.Response]:
        token = await self.session.token()
        request.headers["Authorization"] = f"Bearer {token}"
        response = yield request
        if response.status_code == 401:  # expired, logged out or ended: once per request, never a loop
            request.headers["Authorization"] = f"Bearer {await self.session.renew(token)}"
            yield request


def solana_client(
    url: str,
    *,
    api_key: str | None = None,
    session_token: str | None = None,
    signer: WalletSigner | None = None,
    session: SessionAuth | None = None,
    **options: Any,
) -> AsyncClient:
    """A solana-py ``AsyncClient`` for the gateway with one kind of credentials: an API key, a session
    token, a wallet signing every request, or a :class:`SessionAuth` (renewed on a 401; its owner closes it).

    Example:
        >>> async with solana_client("http://127.0.0.1:8000", api_key=key) as client:  # doctest: +SKIP
        ...     print((await client.get_slot()).value)
    """
    if sum(x is not None for x in (api_key, session_token, signer, session)) != 1:
        raise ValueError("give exactly one of api_key, session_token, signer, session")
    headers = dict(options.pop("extra_headers", None) or {})
    if api_key is not None:
        headers["X-Api-Key"] = api_key
    if session_token is not None:
        headers["Authorization"] = f"Bearer {session_token}"
    client = AsyncClient(url, extra_headers=headers, **options)
    if signer is not None:
        client._provider.session.auth = WalletAuth(signer)  # no public hook in solana-py (module docstring)
    if session is not None:
        client._provider.session.auth = SessionBearer(session)
    return client


def gateway_error(exc: BaseException) -> GatewayError | None:
    """The gateway's typed error behind an exception solana-py raised, or None if there is none."""
    seen: BaseException | None = exc
    while seen is not None:
        if isinstance(seen, httpx2.HTTPStatusError):
            response = seen.response
            try:
                body = orjson.loads(response.content)
            except orjson.JSONDecodeError:
                body = response.text
            headers = {k.lower(): v for k, v in response.headers.items()}
            return error_from_answer(response.status_code, headers, body)
        seen = seen.__cause__ or seen.__context__
    return None

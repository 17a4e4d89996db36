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

from collections.abc import Generator
from typing import Any

import httpx2
import orjson
from solana.rpc.async_api import AsyncClient

from gateway.client.errors import GatewayError, error_from_answer
from gateway.client.signer import WalletSigner


class WalletAuth(httpx2.Auth):
    """Signs each request with the wallet's four ``X-*`` headers (method, path and the exact body)."""

    requires_request_body = True

    def __init__(self, signer: WalletSigner) -> None:
        self.signer = signer

    def auth_flow(self, request: httpx2.Request) -> Generator[httpx2.Request, httpx2.Response, None]:
        request.headers.update(self.signer.headers(request.method, request.url.path, request.content))
        yield request


def solana_client(
    url: str,
    *,
    api_key: str | None = None,
    session_token: str | None = None,
    signer: WalletSigner | None = None,
    **options: Any,
) -> AsyncClient:
    """A solana-py ``AsyncClient`` for the gateway with one kind of credentials.

    Example:
        >>> async with solana_client("http://127.0.0.1:8000", api_key=key) as client:  # doctest: +SKIP
        ...     print((await client.get_slot()).value)
    """
    if sum(x is not None for x in (api_key, session_token, signer)) != 1:
        raise ValueError("give exactly one of api_key, session_token, signer")
    headers = dict(options.pop("extra_headers", None) or {})
    if api_key is not None:
        headers["X-Api-Key"] = api_key
    if session_token is not None:
        headers["Authorization"] = f"Bearer {session_token}"
    client = AsyncClient(url, extra_headers=headers, **options)
    if signer is not None:
        client._provider.session.auth = WalletAuth(signer)  # no public hook in solana-py (module docstring)
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

"""A session that renews itself: the token of a signed challenge (docs/api.md, Authentication), opened on
first use and signed again when the gateway refuses it (a 401, or a ``/ws`` close 1008).

Renewal is tied to the token that failed, not to a count: every request or socket that saw the same
token refused asks :meth:`SessionAuth.renew` with it, and only the first signs a new challenge; the
others get the token it opened. A request renews at most once (:class:`gateway_client.GatewayClient`
raises the second 401), so a wallet the gateway refuses for good never loops.

Example:
    >>> auth = SessionAuth("http://127.0.0.1:8000", WalletSigner.from_file("id.json"))  # doctest: +SKIP
    >>> async with GatewayClient("http://127.0.0.1:8000", session=auth) as gw:  # doctest: +SKIP
    ...     print(await gw.rpc("getSlot"))
"""

from __future__ import annotations

import asyncio
from typing import Any

import aiohttp
import orjson

from gateway_client.errors import GatewayError, answer_or_raise
from gateway_client.signer import WalletSigner

__all__ = ["SessionAuth"]


class SessionAuth:
    """One wallet's session token for one gateway.

    Args:
        url: the gateway's base URL.
        signer: the wallet whose challenges it signs.
        http: an aiohttp session to use (its owner closes it); None: one of its own, closed by :meth:`close`.

    Attributes:
        opened: sessions opened so far (1 after the first use, one more per renewal).
    """

    def __init__(self, url: str, signer: WalletSigner, *, http: aiohttp.ClientSession | None = None) -> None:
        self.url = url.rstrip("/")
        self.signer = signer
        self.opened = 0
        self._http = http
        self._own_http = http is None
        self._token: str | None = None
        self._lock = asyncio.Lock()  # concurrent first uses and renewals open one session, not one each

    @property
    def current(self) -> str | None:
        """The token in use, None before the first."""
        return self._token

    async def token(self) -> str:
        """The session token, opening a session on first use."""
        if self._token is not None:
            return self._token
        async with self._lock:
            if self._token is None:
                self._token = await self._open()
            return self._token

    async def renew(self, refused: str | None) -> str:
        """A new token after ``refused`` was refused; the current one if another caller renewed already."""
        async with self._lock:
            if self._token is None or self._token == refused:
                self._token = await self._open()
            return self._token

    async def headers(self) -> dict[str, str]:
        """``Authorization: Bearer <token>``."""
        return {"Authorization": f"Bearer {await self.token()}"}

    async def logout(self) -> None:
        """``POST /auth/logout``: end the session at the gateway (the next use opens a new one)."""
        token, self._token = self._token, None
        if token is not None:
            headers = {"Authorization": f"Bearer {token}", "Content-Type": "application/json"}
            async with self._session().post(self.url + "/auth/logout", data=b"{}", headers=headers) as resp:
                answer_or_raise(resp.status, {k.lower(): v for k, v in resp.headers.items()}, await resp.read())

    async def close(self) -> None:
        """Close its own HTTP session (one given to it stays open)."""
        if self._own_http and self._http is not None:
            await self._http.close()
            self._http = None

    async def _open(self) -> str:
        pubkey = self.signer.pubkey
        challenge = await self._post("/auth/challenge", {"pubkey": pubkey})
        text = str(challenge["challenge"])
        proof = {"pubkey": pubkey, "challenge": text, "signature": self.signer.sign_challenge(text)}
        token = str((await self._post("/auth/verify", proof))["token"])
        self.opened += 1
        return token

    async def _post(self, path: str, document: dict[str, Any]) -> dict[str, Any]:
        headers = {"Content-Type": "application/json"}
        async with self._session().post(self.url + path, data=orjson.dumps(document), headers=headers) as resp:
            answer = answer_or_raise(resp.status, {k.lower(): v for k, v in resp.headers.items()}, await resp.read())
        if not isinstance(answer, dict):
            raise GatewayError(resp.status, None, f"expected a JSON object, got {str(answer)[:200]}")
        return answer

    def _session(self) -> aiohttp.ClientSession:
        if self._http is None:
            self._http = aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=30))
        return self._http

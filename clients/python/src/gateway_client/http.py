"""``GatewayClient``: an async client of the gateway's HTTP API, with typed errors and safe retries.

Needs nothing of the server (aiohttp, PyNaCl, base58). Credentials: an API key; or a wallet key,
used to sign each request or, with ``use_session`` (or a :class:`SessionAuth`), to open a session whose
token the client renews once when a request is refused 401 with it (expired, logged out, ended).
Retries: a 429 after its ``Retry-After``; a 502 or 503 with exponential backoff and jitter (from 2 s
and 5 s, as the API reference says), but never a send: a send that failed may have been broadcast,
and only the caller can check (``getSignatureStatuses``) before sending again.
"""

from __future__ import annotations

import asyncio
import base64
import random
import weakref
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import aiohttp
import orjson

from gateway_client.errors import (
    AuthFailed,
    BackendUnavailable,
    GatewayError,
    RateLimited,
    answer_or_raise,
    error_from_answer,
)
from gateway_client.session import SessionAuth
from gateway_client.signals import SignalFilter, SignalStream, StreamOptions
from gateway_client.signer import WalletSigner

#: Methods never retried after a failure that may have reached the node.
SEND_METHODS = frozenset({"sendTransaction", "sendSmartTransaction", "sendAndConfirm", "sendBundle"})


@dataclass(frozen=True)
class Meter:
    """The credit and rate headers of the last answer (None where it had none)."""

    credits_remaining: int | None = None
    credits_low: bool = False
    rate_limit: int | None = None
    rate_remaining: int | None = None
    rate_reset: int | None = None
    request_id: str | None = None

    @classmethod
    def of(cls, headers: dict[str, str]) -> Meter:
        def number(name: str) -> int | None:
            value = headers.get(name)
            return int(value) if value is not None and value.isdigit() else None

        return cls(
            credits_remaining=number("x-credits-remaining"),
            credits_low=headers.get("x-credits-low") == "true",
            rate_limit=number("x-ratelimit-limit"),
            rate_remaining=number("x-ratelimit-remaining"),
            rate_reset=number("x-ratelimit-reset"),
            request_id=headers.get("x-request-id"),
        )


class GatewayClient:
    """Args:
    url: the gateway's base URL, e.g. ``http://127.0.0.1:8000``.
    api_key: an API key (``srpc_live_...``).
    signer: a wallet key; each request is signed unless ``use_session``.
    use_session: sign a challenge once and send the session token (renewed once on a 401).
    session: a :class:`SessionAuth` to use (shared with other clients or streams); implies ``use_session``.
    max_retries: how often a 429, 502 or 503 is retried (never for a send after a 502/503).
    backoff_s: the first backoff after a 502 (a 503's is 2.5 times it).

    Example:
        >>> async with GatewayClient("http://127.0.0.1:8000", api_key=key) as gw:  # doctest: +SKIP
        ...     slot = await gw.rpc("getSlot")
        ...     print(slot, gw.meter.credits_remaining)
    """

    def __init__(
        self,
        url: str,
        *,
        api_key: str | None = None,
        signer: WalletSigner | None = None,
        use_session: bool = False,
        session: SessionAuth | None = None,
        max_retries: int = 3,
        backoff_s: float = 2.0,
        timeout_s: float = 60.0,
    ) -> None:
        if session is not None:
            use_session, signer = True, signer or session.signer
        if use_session and signer is None:
            raise ValueError("use_session needs a signer")
        self.url = url.rstrip("/")
        self.api_key = api_key
        self.signer = signer
        self.use_session = use_session
        self.max_retries = max_retries
        self.backoff_s = backoff_s
        self.meter = Meter()
        self._http = aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=timeout_s))
        # A wallet's session: the requests' credentials with use_session, the signal stream's in any case.
        self.session: SessionAuth | None = session
        if session is None and signer is not None:
            self.session = SessionAuth(self.url, signer, http=self._http)
        self._streams: weakref.WeakSet[SignalStream] = weakref.WeakSet()

    async def __aenter__(self) -> GatewayClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def close(self) -> None:
        """Close the HTTP session and every signal stream still open."""
        for stream in list(self._streams):
            await stream.aclose()
        await self._http.close()

    # -- JSON-RPC --------------------------------------------------------------------------------

    async def rpc(self, method: str, params: list[Any] | None = None) -> Any:
        """One JSON-RPC call; its ``result``, or the typed error (:class:`RpcError` for a JSON-RPC error)."""
        body = orjson.dumps({"jsonrpc": "2.0", "id": 1, "method": method, "params": params or []})
        return (await self.request("POST", "/", body, retry_unsafe=method not in SEND_METHODS))["result"]

    async def batch(self, calls: list[tuple[str, list[Any]]]) -> list[dict[str, Any]]:
        """A batch; the answers in call order, each a JSON-RPC response (errors are not raised)."""
        items = [{"jsonrpc": "2.0", "id": n, "method": m, "params": p} for n, (m, p) in enumerate(calls)]
        safe = not any(m in SEND_METHODS for m, _ in calls)
        answers = await self.request("POST", "/", orjson.dumps(items), retry_unsafe=safe)
        return sorted(answers, key=lambda a: a.get("id") if isinstance(a.get("id"), int) else 0)

    # -- sending ---------------------------------------------------------------------------------

    async def send_and_confirm(self, transaction: bytes, *, skip_preflight: bool = True) -> dict[str, Any]:
        """``sendAndConfirm`` a signed transaction; the result (``status``: confirmed, failed or unknown).
        Never retried: on a timeout ask :meth:`send_status` before sending anything anew."""
        encoded = base64.b64encode(transaction).decode()
        result: dict[str, Any] = await self.rpc("sendAndConfirm", [encoded, {"skipPreflight": skip_preflight}])
        return result

    async def send_status(self, signature: str) -> dict[str, Any] | None:
        """``getSendStatus``: what became of a ``sendAndConfirm`` and whether a retry is safe."""
        result: dict[str, Any] | None = await self.rpc("getSendStatus", [signature])
        return result

    async def send_bundle(self, transactions: list[bytes]) -> str:
        """``POST /relay/sendBundle``: 1 to 5 signed transactions that tip; the bundle id."""
        encoded = [base64.b64encode(tx).decode() for tx in transactions]
        body = {"jsonrpc": "2.0", "id": 1, "method": "sendBundle", "params": [encoded, {"encoding": "base64"}]}
        answer = await self.request("POST", "/relay/sendBundle", orjson.dumps(body), retry_unsafe=False)
        return str(answer["result"])

    async def bundle_statuses(self, bundle_ids: list[str]) -> list[dict[str, Any] | None]:
        """``POST /relay/getBundleStatuses``: per id its slot and confirmation status, or None."""
        body = {"jsonrpc": "2.0", "id": 1, "method": "getBundleStatuses", "params": [bundle_ids]}
        answer = await self.request("POST", "/relay/getBundleStatuses", orjson.dumps(body))
        return list(answer["result"]["value"])

    async def tip_accounts(self) -> list[str]:
        """``GET /relay/getTipAccounts``: where a bundle's tip may go."""
        return list((await self.request("GET", "/relay/getTipAccounts"))["result"])

    # -- REST ------------------------------------------------------------------------------------

    async def account_info(self) -> dict[str, Any]:
        result: dict[str, Any] = await self.request("GET", "/account/info")
        return result

    async def create_api_key(self) -> str:
        """A new API key for the signer's wallet (creating the account if needed); revokes the old one."""
        if self.signer is None:
            raise ValueError("creating an API key needs a signer")
        answer = await self.request("POST", "/account/api-key", b"{}", sign=True)
        return str(answer["api_key"])

    async def confirm_deposit(self, signature: str) -> dict[str, Any]:
        result: dict[str, Any] = await self.request(
            "POST", "/account/confirm-deposit", orjson.dumps({"signature": signature})
        )
        return result

    async def x402_settle(self, transaction: bytes | str) -> dict[str, Any]:
        """``POST /x402/settle``: a signed x402 payment (the wire bytes, or their base64), self-paid or
        sponsored (the service co-signs); ``{success, transaction, network, message}``. Needs no
        credentials. Never retried: the gateway refuses the same transaction twice anyway. Credit it
        afterwards with :meth:`confirm_deposit` (signed by the paying wallet) once it is finalized."""
        encoded = transaction if isinstance(transaction, str) else base64.b64encode(transaction).decode()
        body = orjson.dumps({"transaction": encoded})
        result: dict[str, Any] = await self.request("POST", "/x402/settle", body, retry_unsafe=False)
        return result

    # -- signals ---------------------------------------------------------------------------------

    def signals(
        self,
        *,
        kinds: str | Iterable[str] | None = None,
        mint: str | None = None,
        programs: str | Iterable[str] | None = None,
        since_slot: int | None = None,
        options: StreamOptions | None = None,
    ) -> SignalStream:
        """The signal stream of ``/ws`` (``subscribeSignal``): an async iterator of signal events, each
        once, resumed after a disconnect with a gap-fill from ``GET /signals/recent``
        (:mod:`gateway_client.signals`). Costs 5 credits per connection and 1 per event delivered.

        Args:
            kinds: a kind or several (``newPair``, ``graduation``, ``largeSwap``, ``walletActivity``);
                None for all.
            mint: only this token mint's events.
            programs: a program id or several; None for every watched program.
            since_slot: first yield the stored events after this slot (as far back as the log keeps).
            options: bounds and timings (:class:`StreamOptions`).

        Raises (while iterating):
            AuthFailed: the key or session was refused (close 4001, or 1008 after one renewal).
            InsufficientCredits: the balance fell below the socket's minimum (close 4002).
            RateLimited: too many messages per second on the socket (close 4003).
            RpcError: the filter was refused (-32602) or the connection has too many subscriptions.
            ConnectionLost: the connection could not be opened again within ``max_reconnects`` attempts.

        Example:
            >>> async with GatewayClient(url, api_key=key) as gw:  # doctest: +SKIP
            ...     async with gw.signals(kinds=["newPair"]) as stream:
            ...         async for event in stream:
            ...             print(event["slot"], event["mint"], event["curve_type"])
        """
        stream = SignalStream(self, SignalFilter.of(kinds, mint, programs), since_slot=since_slot, options=options)
        self._streams.add(stream)
        return stream

    async def recent_signals(
        self,
        *,
        limit: int | None = None,
        kind: str | None = None,
        since_slot: int | None = None,
        before: str | None = None,
    ) -> dict[str, Any]:
        """``GET /signals/recent`` (public, free): ``events`` newest first, each with its log ``id``
        (``<slot>-<n>``, for ``before``); ``more`` when older ones matched past ``limit``;
        ``next_since_slot``, the ``since_slot`` that gets only what came after this answer (docs/api.md)."""
        query = {"limit": limit, "kind": kind, "since_slot": since_slot, "before": before}
        return await self._get_public("/signals/recent", {k: str(v) for k, v in query.items() if v is not None})

    async def session_token(self, *, renew: bool = False) -> str:
        """The signer's session token (``POST /auth/challenge`` and ``/auth/verify``), opened on first
        use; with ``renew``, a new one in place of the current (refused) one. The WebSocket sends it as
        ``Authorization: Bearer``."""
        if self.session is None:
            raise ValueError("a session needs a signer")
        return await (self.session.renew(self.session.current) if renew else self.session.token())

    # -- the one request path --------------------------------------------------------------------

    async def request(
        self, method: str, path: str, body: bytes = b"", *, retry_unsafe: bool = True, sign: bool = False
    ) -> Any:
        """Send with credentials, retry what is safe to retry, raise what the gateway refused."""
        attempt = 0
        renewed = False
        while True:
            token: str | None = None
            try:
                headers, token = await self._credentials(method, path, body, sign)
                return await self._once(method, path, body, headers)
            except RateLimited as exc:  # never admitted: safe to retry, sends included
                if attempt >= self.max_retries:
                    raise
                await asyncio.sleep(exc.retry_after + random.uniform(0, 0.2))
            except BackendUnavailable as exc:
                if attempt >= self.max_retries or not retry_unsafe or exc.status == 504:
                    raise
                base = self.backoff_s * (2.5 if exc.status == 503 else 1.0)
                await asyncio.sleep(base * 2**attempt * random.uniform(0.8, 1.2))
            except AuthFailed:
                # The session token was refused (expired, logged out, ended): sign a new challenge, once per
                # request; a second 401 is the wallet's own problem, raised rather than looped on.
                if token is None or renewed or self.session is None:
                    raise
                await self.session.renew(token)
                renewed = True
                continue
            attempt += 1

    async def _once(self, method: str, path: str, body: bytes, credentials: dict[str, str]) -> Any:
        headers = {"Content-Type": "application/json", **credentials}
        async with self._http.request(method, self.url + path, data=body or None, headers=headers) as resp:
            raw = await resp.read()
            answer_headers = {k.lower(): v for k, v in resp.headers.items()}
        self.meter = Meter.of(answer_headers)
        try:
            document = orjson.loads(raw) if raw else None
        except orjson.JSONDecodeError:
            document = raw.decode("utf-8", "replace")
        error = error_from_answer(resp.status, answer_headers, document)
        if error is not None:
            raise error
        return document

    async def _credentials(self, method: str, path: str, body: bytes, sign: bool) -> tuple[dict[str, str], str | None]:
        """The request's credential headers, and the session token among them (None for another kind)."""
        if self.signer is not None and (sign or (self.api_key is None and not self.use_session)):
            return self.signer.headers(method, path, body), None
        if self.api_key is not None:
            return {"X-Api-Key": self.api_key}, None
        if self.use_session and self.session is not None:
            token = await self.session.token()
            return {"Authorization": f"Bearer {token}"}, token
        return {}, None

    async def _get_public(self, path: str, query: dict[str, str]) -> dict[str, Any]:
        """A public route: no credentials (they would cost a signature, and a nonce, for nothing)."""
        async with self._http.get(self.url + path, params=query) as resp:
            return _document(resp.status, {k.lower(): v for k, v in resp.headers.items()}, await resp.read())


def _document(status: int, headers: dict[str, str], raw: bytes) -> dict[str, Any]:
    """A JSON object answer, or its typed error."""
    answer = answer_or_raise(status, headers, raw)
    if not isinstance(answer, dict):
        raise GatewayError(status, None, f"expected a JSON object, got {str(answer)[:200]}")
    return answer


__all__ = ["SEND_METHODS", "GatewayClient", "GatewayError", "Meter", "SessionAuth"]

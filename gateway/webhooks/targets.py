"""Where a delivery may go: the dispatcher's guard against server-side request forgery.

A subscription's URL was checked when it was created, but a name's addresses change (DNS rebinding:
a public answer at creation, ``127.0.0.1`` at delivery). So every delivery is checked where it
connects, on the addresses it connects to:

- :func:`gateway.webhooks.validation.url_problem` before anything is sent (the check made at
  creation, made again: ``https://`` only, and a host written as an IP address must be public);
- :class:`GuardedResolver`, the connector's resolver: a name with any forbidden address among its
  answers is refused. aiohttp connects only to the addresses its resolver returned (and caches only
  those), so what was checked is what is connected to: no second lookup between check and connect;
- :func:`guarded_socket`, the connector's socket factory: it sees the exact address of every
  connection the connector opens (IP literals skip the resolver) and refuses a forbidden one.

A refusal raises :class:`RefusedTarget` (an ``OSError``, which aiohttp wraps in
``ClientConnectorError``); :func:`refusal_of` finds it again; its reason names the setting that
would accept the target. With ``webhook_allow_private`` (a development setting) none of this
applies and ``http://`` is allowed: :func:`allow_private` is whether it is on, which ``gateway up``
decides once (explicitly set, as set; else on exactly with the embedded devnode) and hands on.

The connector also tells an attempt whether it reached its receiver (:func:`reaching`): whether a
connection was had (resolved, connected, TLS done), on which the request is then written. A paid
delivery is refunded only when no attempt did (docs/api.md, Billing of deliveries), and only the
connector knows where a failure came: a timeout looks the same before and after the connection.
"""

from __future__ import annotations

import socket
from contextvars import ContextVar, Token

import aiohttp
from aiohappyeyeballs import AddrInfoType
from aiohttp.abc import AbstractResolver, ResolveResult
from aiohttp.resolver import DefaultResolver

from gateway.webhooks.rules import forbidden_address
from gateway.webhooks.settings import WebhookSettings
from gateway.webhooks.validation import LOCAL_RECEIVERS

SETTING = "webhook_allow_private"


def allow_private(settings: WebhookSettings) -> bool:
    """Whether the gateway ``settings`` describe accepts local receivers (``http://``, loopback and
    private hosts): ``webhook_allow_private`` as set (environment, TOML file or argument), either way;
    unset, on exactly when no node is configured (``upstreams``, ``upstream_rpc_url``), so ``gateway up``
    starts the embedded devnode: a test chain on the developer's machine, whose receivers are local too. Call it on the
    settings as configured, before the stack fills in the devnode's URL."""
    if SETTING in settings.model_fields_set:
        return settings.webhook_allow_private
    return settings.embedded_chain


def receivers_report(settings: WebhookSettings) -> str:
    """``gateway up``'s line about which receivers webhooks may post to (``settings`` as configured)."""
    explicit = SETTING in settings.model_fields_set
    if allow_private(settings):
        local = "local receivers accepted (http://, loopback and private hosts)"
        if explicit:
            return f"{local}: {SETTING} = true, for development only"
        return f"{local}: the embedded devnode's default (GATEWAY_WEBHOOK_ALLOW_PRIVATE=false refuses them)"
    why = f"{SETTING} = false" if explicit else "a real network's default"
    return f"receivers must be https:// at public addresses ({why}; local ones: {LOCAL_RECEIVERS})"


class RefusedTarget(OSError):
    """A delivery target the guard refuses; ``reason`` says why."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


def address_refusal(address: str) -> str | None:
    """Why no delivery may connect to ``address`` (an IP address as a socket gives it), or None."""
    try:
        why = forbidden_address(address.split("%", 1)[0])  # an IPv6 zone index names no other address
    except ValueError:
        return f"{address} is not an IP address"
    return None if why is None else f"{address} is {why}"


class GuardedResolver(AbstractResolver):
    """Resolves with ``inner`` (aiohttp's default) and refuses a name with any forbidden address."""

    def __init__(self, inner: AbstractResolver | None = None) -> None:
        self._inner = inner if inner is not None else DefaultResolver()

    async def resolve(
        self, host: str, port: int = 0, family: socket.AddressFamily = socket.AF_INET
    ) -> list[ResolveResult]:
        results = await self._inner.resolve(host, port, family)
        for result in results:
            why = address_refusal(result["host"])
            if why is not None:
                raise RefusedTarget(f"{host} resolves to {why} ({LOCAL_RECEIVERS})")
        return results

    async def close(self) -> None:
        await self._inner.close()


def guarded_socket(addr_info: AddrInfoType) -> socket.socket:
    """aiohttp's socket factory: the socket for ``addr_info``, unless its address is forbidden."""
    family, kind, proto, _, sockaddr = addr_info
    why = address_refusal(str(sockaddr[0]))
    if why is not None:
        raise RefusedTarget(f"{why} ({LOCAL_RECEIVERS})")
    return socket.socket(family, kind, proto)


class Reached:
    """Whether the attempt it was made for got a connection to its receiver."""

    __slots__ = ("connected",)

    def __init__(self) -> None:
        self.connected = False


#: The attempt running in this task (aiohttp connects in the task that makes the request).
_ATTEMPT: ContextVar[Reached | None] = ContextVar("webhook_attempt", default=None)


class reaching:  # lower case: used as the function it replaced, ``with reaching() as reached``
    """Around one attempt: what it reached, as :class:`ReachingConnector` saw it. A class, not a
    generator: it runs on every delivery."""

    __slots__ = ("_reached", "_token")
    _reached: Reached
    _token: Token[Reached | None]

    def __enter__(self) -> Reached:
        self._reached = Reached()
        self._token = _ATTEMPT.set(self._reached)
        return self._reached

    def __exit__(self, *exc: object) -> None:
        _ATTEMPT.reset(self._token)


class ReachingConnector(aiohttp.TCPConnector):
    """aiohttp's connector, marking the current attempt (:func:`reaching`) once it has a connection:
    a new one (after DNS, TCP and TLS) or one kept alive. A failure before that (the name, the
    address, the handshake, the guard, a timeout while connecting) sent nothing."""

    async def connect(
        self,
        req: aiohttp.ClientRequest,
        traces: list[aiohttp.tracing.Trace],
        timeout: aiohttp.ClientTimeout,  # noqa: ASYNC109 (aiohttp's signature)
    ) -> aiohttp.connector.Connection:
        connection = await super().connect(req, traces, timeout)
        reached = _ATTEMPT.get()
        if reached is not None:
            reached.connected = True
        return connection


def connector(limit: int, allow_private: bool) -> aiohttp.TCPConnector:
    """The dispatcher's connector: keep-alive, ``limit`` connections, the guard unless ``allow_private``."""
    if allow_private:
        return ReachingConnector(limit=limit, limit_per_host=0)
    return ReachingConnector(limit=limit, limit_per_host=0, resolver=GuardedResolver(), socket_factory=guarded_socket)


def refusal_of(exc: BaseException) -> str | None:
    """The guard's reason when ``exc`` (or what caused it) is its refusal, else None."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if isinstance(current, RefusedTarget):
            return current.reason
        os_error = getattr(current, "os_error", None)  # aiohttp's ClientConnectorError keeps the cause here
        if isinstance(os_error, RefusedTarget):
            return os_error.reason
        current = current.__cause__ or current.__context__
    return None

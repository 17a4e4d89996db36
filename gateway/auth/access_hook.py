"""What auth asks of the account access rules (docs/api.md, "Access rules"), which live above it in
:mod:`gateway.access`: the auth stage and :class:`gateway.callers.entry.Entry` call it once a caller is proved,
and the process that serves connections gives it to :class:`gateway.auth.services.AuthServices`."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Protocol

from gateway.core.identity import Identity
from gateway.pipeline.stages import Call


class AccessCheck(Protocol):
    #: Moves with every rules change heard (a connection checked before one is checked again).
    generation: int

    def check(self, call: Call, identity: Identity) -> Awaitable[None] | None:
        """Refuse (raise 403 ACCESS_DENIED) a call its account's rules forbid: decided at once from the
        process's cache (None), or an awaitable that loads the rules first."""
        ...

    def watch(self, call: Call, identity: Identity, end: Callable[[str], None], generation: int) -> Callable[[], None]:
        """Hold an open connection, ended with ``end(reason)`` when a rules change forbids it; its release."""
        ...

    def permits(self, identity: Identity, method: str, method_class: str | None) -> Awaitable[bool]:
        """Whether the rules allow ``method`` (of ``method_class``) to this identity."""
        ...

"""Open connections by the credential that opened them, so that a revoked credential ends them everywhere.

HTTP refuses a rotated API key or a logged-out session token at once: every request is authenticated.
A WebSocket or a gRPC stream is authenticated once, when it opens, and would outlive its credential.
So each process keeps here which of its open connections hold which credential, by the credential's
digest (never the credential itself), and ends them (docs/api.md, "Revoked credentials"):

- when a revocation arrives on the ``REVOKED_KEYS`` channel (a key rotation or a logout, published by
  whichever replica did it; :mod:`gateway.auth.api_keys` follows the channel);
- when a re-check finds a held credential no longer valid: after the channel was lost (messages
  published meanwhile were missed), every ``recheck_s`` (a session that expired), and at once for a
  connection whose authentication straddled a revocation message.

An account's suspension is a revocation too (docs/api.md, ACCOUNT_SUSPENDED): every connection also
holds its account, as ``("account", pubkey)``, and ``gateway account suspend`` publishes
:func:`suspension_message` on the same ``REVOKED_KEYS`` channel (``resume`` publishes
:func:`resumption_message`). :meth:`Revocations.on_message` ends the account's connections and tells
:attr:`Revocations.listeners` (the meter stops spending the account's leases at once); the re-checks
ask whether the account is still active.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
from collections.abc import Awaitable, Callable
from typing import Literal

log = logging.getLogger(__name__)

Kind = Literal["key", "session", "account"]
#: A credential as held: its kind and its digest (hex; the API key's HMAC, the session token's SHA-256),
#: or ``("account", pubkey)`` for the account every connection belongs to.
Credential = tuple[Kind, str]
#: Ends one connection; called with the reason, which the connection shows its client.
End = Callable[[str], None]
Verify = Callable[[Credential], Awaitable[bool]]
#: Told of an account's suspension (True) or resumption (False), by public key.
Listener = Callable[[str, bool], None]

REASONS: dict[Kind, str] = {
    "key": "the API key was revoked (rotated); reconnect with the new key",
    "session": "the session token is logged out or expired; sign in again",
    "account": "ACCOUNT_SUSPENDED: this account is suspended; contact the operator",
}
RECHECK_S = 30.0
#: The ``REVOKED_KEYS`` messages of an account's suspension and resumption: the prefix, then its pubkey.
SUSPENDED_PREFIX = "suspended:"
RESUMED_PREFIX = "resumed:"


def suspension_message(pubkey: str) -> str:
    return SUSPENDED_PREFIX + pubkey


def resumption_message(pubkey: str) -> str:
    return RESUMED_PREFIX + pubkey


def account_credential(pubkey: str) -> Credential:
    return ("account", pubkey)


class Revocations:
    def __init__(self, verify: Verify | None = None) -> None:
        self.verify = verify  # None: nothing can be re-checked (a key store without its services)
        self.generation = 0  # moves with every revocation heard
        self._held: dict[Credential, dict[int, End]] = {}
        self._ids = itertools.count()
        self._tasks: set[asyncio.Task[None]] = set()
        #: Told of every suspension and resumption heard (the meter, :meth:`gateway.credits.meter.Meter.suspend`).
        self.listeners: list[Listener] = []
        #: Other ``REVOKED_KEYS`` messages by prefix, each handler given the rest (the access rules'
        #: changes: :mod:`gateway.access.guard`), and who is told when messages may have been missed.
        self.handlers: dict[str, Callable[[str], None]] = {}
        self.resync_hooks: list[Callable[[], None]] = []

    def on_message(self, message: str) -> bool:
        """Handle a ``REVOKED_KEYS`` message if it is an account's suspension or resumption, or one of
        :attr:`handlers` (True)."""
        for prefix, handler in self.handlers.items():
            if message.startswith(prefix):
                handler(message[len(prefix) :])
                return True
        if message.startswith(SUSPENDED_PREFIX):
            self.suspended(message[len(SUSPENDED_PREFIX) :])
            return True
        if message.startswith(RESUMED_PREFIX):
            self._tell(message[len(RESUMED_PREFIX) :], False)
            return True
        return False

    def suspended(self, pubkey: str) -> int:
        """The account is suspended: end its connections and tell the listeners; how many ended."""
        self._tell(pubkey, True)
        return self.revoked(account_credential(pubkey))

    def _tell(self, pubkey: str, suspended: bool) -> None:
        for listener in self.listeners:
            try:
                listener(pubkey, suspended)
            except Exception:  # one listener's failure must not keep the connections open
                log.exception("a suspension listener failed for %s", pubkey)

    def hold(self, credential: Credential, end: End, generation: int | None) -> Callable[[], None]:
        """Register an open connection; returns its release. ``generation`` is :attr:`generation` as it
        was before the connection was authenticated: if a revocation was heard since, the credential is
        checked again now, since the authentication may have read the store before the revocation.
        None (when it was authenticated is not known here): checked again now."""
        token = next(self._ids)
        self._held.setdefault(credential, {})[token] = end
        if generation is None or generation != self.generation:
            self._spawn(self._recheck([credential]))

        def release() -> None:
            holders = self._held.get(credential)
            if holders is not None:
                holders.pop(token, None)
                if not holders:
                    del self._held[credential]

        return release

    def hold_all(self, credentials: list[Credential], end: End, generation: int) -> Callable[[], None]:
        """:meth:`hold` each of ``credentials`` (a connection's credential and its account); one release."""
        releases = [self.hold(credential, end, generation) for credential in credentials]

        def release() -> None:
            for one in releases:
                one()

        return release

    def revoked(self, credential: Credential) -> int:
        """End every connection holding ``credential``; how many there were."""
        self.generation += 1
        holders = self._held.pop(credential, {})
        for end in holders.values():
            end(REASONS[credential[0]])
        return len(holders)

    def resync(self) -> None:
        """Revocations may have been missed: check every held credential again."""
        self.generation += 1
        for hook in self.resync_hooks:
            hook()
        self._spawn(self._recheck(list(self._held)))

    @property
    def held(self) -> int:
        """Holds of a key or a session token (a wallet-signed connection holds none)."""
        return sum(len(holders) for credential, holders in self._held.items() if credential[0] != "account")

    @property
    def held_accounts(self) -> int:
        """Holds of an account: one per open connection, whatever its credential."""
        return sum(len(holders) for credential, holders in self._held.items() if credential[0] == "account")

    async def run(self, recheck_s: float = RECHECK_S) -> None:
        """Re-check every held credential each ``recheck_s``, until cancelled."""
        while True:
            await asyncio.sleep(recheck_s)
            await self._recheck(list(self._held))

    async def stop(self) -> None:
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)

    async def _recheck(self, credentials: list[Credential]) -> None:
        if self.verify is None:
            return
        for credential in credentials:
            if credential not in self._held:
                continue
            try:
                valid = await self.verify(credential)
            except Exception as exc:  # a store down: keep the connection, check again next time
                log.warning("could not re-check a held credential: %s", exc)
                continue
            if not valid:
                self.revoked(credential)

    def _spawn(self, coro: Awaitable[None]) -> None:
        task = asyncio.ensure_future(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

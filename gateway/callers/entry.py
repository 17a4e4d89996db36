"""The one entry of the transports whose connections outlive a request: WebSocket, MCP and gRPC.

HTTP authenticates every request. A WebSocket, a gRPC stream (and each of its unary calls) and an MCP
request are authenticated once, when they open, and then make requests or receive paid deliveries
for as long as they last. What they all need is here, once::

    session = await entry.open(call, end)   # authenticate the Call (its wire, its credentials), and
                                            # hold its credential: a revocation calls ``end(reason)``
    reply = await session.rpc(call)         # a JSON-RPC call: the stages after auth, as POST / runs them
    admission = await session.reserve(n)    # a self-billed unit (a notification, a gRPC message) ...
    session.complete(admission, method, request_id, refunded)   # ... charged or refunded
    await session.recheck()                 # is the credential still good? (ends the holder if not)
    session.close()                         # the connection is gone: release the hold

The stages after auth are JSON-RPC's (``CreditHeaders → readiness → Parse → Metering → Forwarder``,
behind ``error_boundary``), built by :class:`gateway.app.replica.GatewayApp`; a process without them (the gRPC
stream server) bills only self-billed units. A revoked credential (docs/api.md, "Revoked credentials")
ends every connection holding it, on whichever process it was revoked (:mod:`gateway.auth.revocations`).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from gateway.auth.revocations import REASONS, Credential, End, Revocations, account_credential
from gateway.auth.services import AuthServices
from gateway.core.credentials import Credentials
from gateway.core.identity import Identity
from gateway.credits.meter import AccountState, Admission, Meter
from gateway.pipeline.stages import Call, Handler, Reply, error_boundary


class Entry:
    """Args:
    auth: the process's auth services (their authenticator and revocations).
    meter: the process's credit meter, for self-billed units.
    pipeline: the JSON-RPC stages after auth and the forwarder, behind ``error_boundary``; None where
        no JSON-RPC call is made (:meth:`EntrySession.rpc` then refuses to run).
    """

    def __init__(self, auth: AuthServices, meter: Meter, pipeline: Handler | None = None) -> None:
        self.auth = auth
        self.meter = meter
        self.pipeline = pipeline

    async def open(self, call: Call, end: End | None = None) -> EntrySession:
        """Authenticate ``call`` (an account needed) and hold its credential; raises the refusal
        (``ProxyError``, or ``StoreUnavailable``) as the auth stage would. ``end`` (or one bound later,
        :meth:`EntrySession.bind`) is called with the reason once the credential is revoked."""
        revocations = self.auth.revocations
        generation = revocations.generation  # before authenticating: a revocation meanwhile is re-checked
        authenticator = self.auth.authenticator
        identity = authenticator.from_cache(call)
        if identity is None:
            identity = await authenticator.authenticate(call, require_account=True)
        call.identity = identity
        access = self.auth.access  # the account's access rules (gateway.access): checked, then watched
        access_generation = 0 if access is None else access.generation
        if access is not None and (pending := access.check(call, identity)) is not None:
            await pending
        session = EntrySession(self, identity, call.credentials, self.auth.credential_of(call.credentials, identity))
        session.bind(end)
        held = [account_credential(session.pubkey)]  # a suspension ends it too (docs/api.md, ACCOUNT_SUSPENDED)
        if session.credential is not None:
            held.append(session.credential)
        release = revocations.hold_all(held, session._revoked, generation)
        if access is not None:
            session._release = _both(release, access.watch(call, identity, session._revoked, access_generation))
        else:
            session._release = release
        try:
            suspended = (await self.meter.prepare(session.pubkey)).suspended
        except BaseException:
            session.close()
            raise
        if suspended:  # suspended before it opened: it ends at once (bind calls its end)
            session._revoked(REASONS["account"])
        return session

    async def admit(self, call: Call, end: End | None = None) -> tuple[Reply, EntrySession | None]:
        """:meth:`open`, with the answer an HTTP request would get: a refusal rendered by
        ``error_boundary`` (its status, body and headers) and no session, or a 200 carrying the stages'
        headers and the session."""
        opened: list[EntrySession] = []

        async def enter(call: Call) -> Reply:
            opened.append(await self.open(call, end))
            return Reply(200, b"")

        reply = await error_boundary(call, enter)
        return reply, (opened[0] if opened else None)


class EntrySession:
    """One authenticated connection (or stream, or request): its identity, its held credential, and
    the stages after auth for what it does. Built by :meth:`Entry.open`."""

    __slots__ = ("_end", "_entry", "_release", "credential", "credentials", "identity", "pubkey", "revoked")

    def __init__(
        self, entry: Entry, identity: Identity, credentials: Credentials, credential: Credential | None
    ) -> None:
        self._entry = entry
        self.identity = identity
        self.pubkey = identity.pubkey
        self.credentials = credentials  # as the transport extracted them
        self.credential = credential  # what is held (None: a wallet's signature, nothing to revoke)
        self.revoked: str | None = None  # the reason, once the credential was revoked
        self._end: End | None = None
        self._release: Callable[[], None] | None = None

    def bind(self, end: End | None) -> None:
        """Call ``end`` once the credential is revoked (at once if it was already)."""
        self._end = end
        if end is not None and self.revoked is not None:
            end(self.revoked)

    def _revoked(self, reason: str) -> None:
        if self.revoked is None:
            self.revoked = reason
            if self._end is not None:
                self._end(reason)

    # -- requests -------------------------------------------------------------------------------

    def rpc(self, call: Call) -> Awaitable[Reply]:
        """Run a JSON-RPC call of this connection through the stages after auth (its reply always
        rendered: ``error_boundary`` is the first of them)."""
        pipeline = self._entry.pipeline
        if pipeline is None:
            raise RuntimeError("this process runs no JSON-RPC stages")
        call.identity, call.credentials = self.identity, self.credentials
        return pipeline(call)

    def reserve(self, price: int) -> Awaitable[Admission]:
        """Reserve ``price`` credits for a self-billed unit (the meter's awaitable itself: on the
        notification path this adds no await). Complete it with :meth:`complete`."""
        return self._entry.meter.reserve(self.pubkey, price)

    def complete(
        self,
        admission: Admission,
        method: str,
        request_id: str,
        refunded: bool = False,
        *,
        tallied: bool = False,
        calls: int = 1,
    ) -> None:
        """Record a reserved unit's outcome: charged, or refunded (``tallied``, ``calls``: :meth:`Meter.complete`)."""
        self._entry.meter.complete(admission, method, request_id, refunded, tallied=tallied, calls=calls)

    def prepare(self) -> Awaitable[AccountState]:
        """The account's state at the meter (asking the store only when unknown or stale)."""
        return self._entry.meter.prepare(self.pubkey)

    def account(self) -> AccountState | None:
        """What the meter knows of the account (its limits), without an await."""
        return self._entry.meter.accounts.get(self.pubkey)

    def remaining(self) -> int | None:
        """The balance as ``X-Credits-Remaining`` shows it (None: not known yet)."""
        return self._entry.meter.remaining(self.pubkey)

    def permits(self, method: str, method_class: str | None) -> Awaitable[bool]:
        """Whether the account's access rules allow ``method`` on this connection (a subscription)."""
        access = self._entry.auth.access
        if access is None:
            return _allowed()
        return access.permits(self.identity, method, method_class)

    # -- the credential -------------------------------------------------------------------------

    async def recheck(self) -> bool:
        """Whether the credential is still good, asked of its store now; when it is not, every
        connection holding it ends (this one included). Raises ``StoreUnavailable`` when the store
        cannot tell."""
        if self.revoked is not None:
            return False
        credential = self.credential
        if credential is None:
            return True  # a wallet's signature proved the caller for the connection's lifetime
        revocations: Revocations = self._entry.auth.revocations
        if revocations.verify is None or await revocations.verify(credential):
            return True
        revocations.revoked(credential)
        self._revoked(REASONS[credential[0]])  # when this one had already let go of its hold
        return False

    def close(self) -> None:
        """The connection is gone: no revocation reaches it any more (idempotent)."""
        release, self._release = self._release, None
        if release is not None:
            release()


async def _allowed() -> bool:
    return True


def _both(first: Callable[[], None], second: Callable[[], None]) -> Callable[[], None]:
    def release() -> None:
        first()
        second()

    return release

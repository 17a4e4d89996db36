"""``AuthServices``: every store and setting the auth stage and the account routes use, started together.

Built in ``GatewayApp.__init__`` (so stages can hold it before the connections exist) and started in
``GatewayApp.startup`` once PostgreSQL and Redis are open::

    self.auth = AuthServices(settings)                 # __init__
    await self.auth.start(self.conn)                   # startup, after Connections.open
    await self.auth.stop()                             # shutdown, before conn.close()

Until started (or when PostgreSQL or Redis is missing), authenticated requests get 503: the gateway
never serves a paid call it cannot attribute.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from typing import Any

from gateway.auth.access_hook import AccessCheck
from gateway.auth.account_views import Funding
from gateway.auth.api_keys import ApiKeyRotated, ApiKeyStore, RotationHook
from gateway.auth.authenticator import Authenticator
from gateway.auth.cache import NoAccounts
from gateway.auth.errors import not_started
from gateway.auth.failures import FailedAuths
from gateway.auth.key_secret import SECRET_FILE, load_or_create_secret
from gateway.auth.payment_terms import PaymentTerms
from gateway.auth.revocations import RECHECK_S, Credential, Revocations
from gateway.auth.settings import AuthSettings
from gateway.auth.store.accounts import AccountStore, ApiKeyRows
from gateway.auth.store.nonces import NonceStore
from gateway.auth.store.service_keys import compare_cluster_keys
from gateway.auth.store.sessions import (
    CHALLENGE_TTL_MS,
    MAX_SESSIONS,
    TOKEN_TTL_MS,
    SessionStore,
    token_digest,
)
from gateway.auth.strategies import (
    ApiKeyStrategy,
    FundsCheck,
    SessionStrategy,
    Strategy,
    TokenStrategy,
    WalletStrategy,
)
from gateway.base.keys import ServiceKeys, service_keys
from gateway.base.stopping import cancel_and_wait
from gateway.core.client_address import TrustedProxies
from gateway.core.credentials import Credentials, bearer_token
from gateway.core.identity import Identity
from gateway.storage.channels import REVOKED_KEYS, Channel
from gateway.storage.connections import Connections

log = logging.getLogger(__name__)


class AuthServices:
    """One replica's auth state. Options exist for tests (tiny TTLs).

    Args:
        settings: the gateway's settings (data dir, network, USDC mint, credit terms, the service keys'
            addresses: without them construction raises :class:`~gateway.base.config.ConfigError`, see
            gateway/base/keys.py).
        api_key_secret: the 32-byte HMAC secret for API-key hashes; default: ``<home>/keys/api-key-secret``.
        on_api_key_rotated: awaited after each key rotation has committed (in-process listeners; the
            webhook jobs are written in the rotation's transaction, :mod:`gateway.storage.webhook_events`).
        challenge_ttl_ms, token_ttl_ms: lifetimes of challenges and (sliding) session tokens.
        max_sessions: live sessions an account keeps at once (docs/api.md, Account and session routes).
        clock: wall clock for the signature timestamp window.
        unfunded: an account's 402 when the meter knows it has no credits (the wallet strategy asks it
            before recording a nonce on a route that bills its calls); None: never asked.
        access: the account access rules' checks (:class:`gateway.access.guard.AccessGuard`); None: no rules.
        announce_account: tells every process that an account may be new (the CREDITED channel).
    """

    def __init__(
        self,
        settings: AuthSettings,
        *,
        api_key_secret: bytes | None = None,
        on_api_key_rotated: RotationHook | None = None,
        challenge_ttl_ms: int = CHALLENGE_TTL_MS,
        token_ttl_ms: int = TOKEN_TTL_MS,
        max_sessions: int = MAX_SESSIONS,
        clock: Callable[[], float] = time.time,
        unfunded: FundsCheck | None = None,
        access: AccessCheck | None = None,
        announce_account: Callable[[str], Awaitable[None]] | None = None,
    ) -> None:
        self.settings = settings
        self.keys: ServiceKeys = service_keys(
            settings.resolved_home,
            settings.deposit_address,
            settings.fee_payer_address,
            fee_payer_needed=settings.x402_settle,
        )
        #: How this process's keys differ from the cluster's record (compared at start, when Redis is there).
        self.keys_mismatch: str | None = None
        self._secret = api_key_secret
        self._on_rotated = on_api_key_rotated
        self._challenge_ttl_ms = challenge_ttl_ms
        self._token_ttl_ms = token_ttl_ms
        self._max_sessions = max_sessions
        self._clock = clock
        self._authenticator: Authenticator | None = None
        self.terms: PaymentTerms | None = None
        self.funding: Funding | None = None
        self.nonces: NonceStore | None = None
        self.sessions: SessionStore | None = None
        self.api_keys: ApiKeyStore | None = None
        self.accounts: AccountStore | None = None
        self.unfunded = unfunded
        self.access = access
        self.revocations = Revocations(self._still_valid)  # told of revocations by the key store's channel
        #: Keys found without an account, shared by the wallet strategy and the authenticator; told when
        #: an account appears anywhere (the CREDITED channel: :class:`gateway.callers.services.AccountServices`).
        self.no_accounts = NoAccounts()
        self.announce_account = announce_account
        self._recheck: asyncio.Task[None] | None = None

    async def start(self, conn: Connections) -> None:
        home = self.settings.resolved_home
        s = self.settings
        deposit = str(self.keys.deposit)
        fee_payer = str(self.keys.fee_payer) if self.keys.fee_payer is not None else None
        self.terms = PaymentTerms(
            deposit, fee_payer, s.usdc_mint, s.shown_network, s.crediting_delay_s, x402_settle=s.x402_settle
        )
        self.funding = Funding(self.terms, s.credits_per_usdc, s.credit_expiry_seconds)
        if conn.db is None or conn.redis is None:
            log.error("authentication needs PostgreSQL and Redis; authenticated requests will get 503")
            return
        self.keys_mismatch = await compare_cluster_keys(
            conn.redis, {"deposit_address": deposit, "fee_payer_address": fee_payer}
        )
        secret = self._secret if self._secret is not None else load_or_create_secret(home / SECRET_FILE)
        self.nonces = NonceStore(conn.redis, conn.redis_connects)
        self.sessions = SessionStore(conn.redis, self._challenge_ttl_ms, self._token_ttl_ms, self._max_sessions)
        channel = Channel(conn.redis, REVOKED_KEYS)
        self.api_keys = ApiKeyStore(
            ApiKeyRows(conn.db), channel, secret, on_rotated=self._rotated, revocations=self.revocations
        )
        await self.api_keys.start()
        self._recheck = asyncio.get_running_loop().create_task(self.revocations.run(RECHECK_S))
        self.accounts = AccountStore(conn.db)
        wallet = WalletStrategy(self.nonces, self.accounts, self.terms, self._clock, self.no_accounts, self.unfunded)
        strategies: list[Strategy] = [
            ApiKeyStrategy(self.api_keys, self.terms.test_chain),
            wallet,
            SessionStrategy(self.sessions),
            TokenStrategy(self.api_keys, self.sessions),
        ]
        failures = FailedAuths(
            s.ip_limits["auth_failures"], TrustedProxies.parse(s.trusted_proxies), replicas=s.share_replicas
        )
        self._authenticator = Authenticator(
            strategies, self.accounts, self.terms, self.api_keys, failures, self.no_accounts
        )

    async def _rotated(self, event: ApiKeyRotated) -> None:
        """An account's first key may have created the account: no process answers it as missing any
        more, before its owner holds the key."""
        self.no_accounts.appeared(event.pubkey)
        if not event.replaced_previous and self.announce_account is not None:
            await self.announce_account(event.pubkey)
        if self._on_rotated is not None:
            await self._on_rotated(event)

    def keys_view(self) -> dict[str, Any]:
        """``/health``'s ``keys``: the addresses served here, whether the fee payer's secret is, and a mismatch."""
        return self.keys.view(self.keys_mismatch)

    async def stop(self) -> None:
        self._authenticator = None
        task, self._recheck = self._recheck, None
        await cancel_and_wait(task)
        await self.revocations.stop()
        if self.api_keys is not None:
            await self.api_keys.stop()

    def credential_of(self, credentials: Credentials, identity: Identity) -> Credential | None:
        """What a long-lived connection holds, to be ended when it is revoked: its API key or session
        token (a wallet's signature is proof enough for its lifetime; there is nothing to revoke)."""
        if identity.mode == "api_key" and self.api_keys is not None:
            key = credentials.api_key or credentials.token
            return ("key", self.api_keys.digest(key).hex()) if key else None
        if identity.mode == "session":
            token = bearer_token(credentials.authorization) if credentials.authorization else credentials.token
            return ("session", token_digest(token)) if token else None
        return None

    async def logout(self, token: str, pubkey: str | None = None) -> None:
        """End the session everywhere: its key in Redis, then every process's open connections."""
        await self.end_sessions(pubkey, [token_digest(token)])

    async def end_sessions(self, pubkey: str | None, digests: list[str]) -> int:
        """End sessions by their tokens' digests, as :meth:`logout` ends one; how many were live.
        Announced even when they were gone already: a connection may still hold one."""
        sessions, keys = self.sessions, self.api_keys
        if sessions is None or keys is None:
            raise not_started()
        ended = await sessions.end(pubkey, digests)
        await keys.publish_logouts(digests)
        return ended

    async def _still_valid(self, credential: Credential) -> bool:
        kind, digest = credential
        if kind == "account":  # ("account", pubkey): held until the account is suspended
            return self.accounts is None or not await self.accounts.suspended(digest)
        if kind == "key":
            return self.api_keys is not None and await self.api_keys.owner_of_digest(bytes.fromhex(digest)) is not None
        return self.sessions is not None and await self.sessions.live(digest)

    @property
    def authenticator(self) -> Authenticator:
        if self._authenticator is None:
            raise not_started()
        return self._authenticator

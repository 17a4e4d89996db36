"""One strategy per credential type: ``supports`` looks (no I/O), ``authenticate`` proves or raises.

Each raises :class:`ProxyError` on failure: 401 AUTH_FAILED for bad credentials, 403 NONCE_REUSED for
a replay, 503 when the store that would prove them is down (fail closed). Cheap checks come first,
so malformed input never reaches Redis or PostgreSQL.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from typing import Protocol

from gateway.auth.api_keys import KEY_PREFIX, ApiKeyStore, is_api_key_format
from gateway.auth.cache import NoAccounts
from gateway.auth.payment_terms import PaymentTerms, no_account
from gateway.auth.store.accounts import AccountStore
from gateway.auth.store.nonces import Claim, NonceStore
from gateway.auth.store.sessions import SessionStore
from gateway.core.credentials import Credentials, bearer_token
from gateway.core.errors import ProxyError, auth_failed, nonce_reused
from gateway.core.identity import Identity
from gateway.core.signing import signing_message
from gateway.core.wallet_headers import TIMESTAMP, HeaderFailure, parse_wallet_headers, verify_signature
from gateway.pipeline.stages import Call

_SESSION_TOKEN = re.compile(r"[0-9a-f]{64}")
API_KEY_AS_BEARER = "if this is an API key, send it as 'X-Api-Key: <key>' (or ?api-key=<key>), not as a Bearer token"


class Strategy(Protocol):
    kind: str  # "api_key", "wallet", "session" or "token"

    def supports(self, credentials: Credentials) -> bool: ...

    async def authenticate(
        self, credentials: Credentials, call: Call, *, require_account: bool, require_funds: bool = False
    ) -> Identity:
        """``require_account``: the route needs an account record (a strategy that records something,
        as the wallet's nonce, checks it first; the :class:`Authenticator` checks the others).
        ``require_funds``: the route bills its calls, so a strategy that records something first refuses
        an account known to have no credits (the metering stage refuses the others)."""
        ...


#: An account's 402 when it is known, from a cached answer, to have no credits at all; or None.
FundsCheck = Callable[[str], ProxyError | None]


#: How to get a key that works, by whether the gateway runs on the embedded devnode (a dev gateway).
NEW_KEY = "POST /account/api-key (signed by the account's wallet) issues a new one, shown once"
DEV_KEY = f"on this dev gateway `gateway fund` prints its wallet's current key; {NEW_KEY}"


class ApiKeyStrategy:
    kind = "api_key"

    def __init__(self, keys: ApiKeyStore, test_chain: bool = False) -> None:
        self._keys = keys
        how = DEV_KEY if test_chain else NEW_KEY
        self._refusal = f"invalid or revoked API key (a new key revokes the previous one); {how}"

    def supports(self, credentials: Credentials) -> bool:
        return credentials.api_key is not None

    async def authenticate(
        self, credentials: Credentials, call: Call, *, require_account: bool, require_funds: bool = False
    ) -> Identity:
        assert credentials.api_key is not None
        pubkey = await self._keys.lookup(credentials.api_key)
        if pubkey is None:
            raise auth_failed(self._refusal)
        return Identity(pubkey, "api_key")


class WalletStrategy:
    """Per-request signature. Order: headers, timestamp window, signature, account, and only then the nonce.

    The nonce is recorded last so that a forged or stale request cannot burn its owner's nonce, and
    nothing at all is recorded for a request that fails. On a route that needs an account, a keypair
    without one is refused 402 before its nonce is recorded, so fresh keypairs cannot fill Redis with
    nonces, and the "no" is remembered a few seconds (``no_accounts``), so its replays cost no store
    query either (the authenticator counts each such 402 against the address's budget, docs/api.md
    Limits); on a route that bills its calls, so is an account the meter knows has no credits
    (``unfunded``, set by the app: a cached answer, no store trip). The routes that serve keypairs
    without an account (the account and session routes: ``POST /account/api-key`` creates the account,
    and its replay protection must hold) are bound by per-address limits instead (docs/api.md,
    Authentication).
    """

    kind = "wallet"

    def __init__(
        self,
        nonces: NonceStore,
        accounts: AccountStore,
        terms: PaymentTerms,
        clock: Callable[[], float] = time.time,
        no_accounts: NoAccounts | None = None,
        unfunded: FundsCheck | None = None,
    ) -> None:
        self._nonces = nonces
        self._accounts = accounts  # a "yes" is cached: an account's own calls do not reach PostgreSQL
        # and a "no" briefly, so a stranger's replays do not either (an empty one is falsy: no `or`)
        self.no_accounts = NoAccounts() if no_accounts is None else no_accounts
        self._terms = terms
        self._clock = clock
        self.unfunded = unfunded

    def supports(self, credentials: Credentials) -> bool:
        return credentials.wallet is not None

    async def authenticate(
        self, credentials: Credentials, call: Call, *, require_account: bool, require_funds: bool = False
    ) -> Identity:
        assert credentials.wallet is not None
        parsed = parse_wallet_headers(credentials.wallet, self._clock())
        if isinstance(parsed, HeaderFailure):
            raise auth_failed(parsed.reason)
        message = signing_message(call.verb, call.path, credentials.wallet[TIMESTAMP], parsed.nonce, call.body)
        if not verify_signature(parsed.pubkey_bytes, message.encode("utf-8", "replace"), parsed.signature):
            raise auth_failed(
                "X-Signature does not verify: sign ledger-svc:v2:{METHOD}:{PATH}:{TIMESTAMP}:{NONCE}:{BODY_HASH}"
            )
        if require_account and not await has_account(self._accounts, self.no_accounts, parsed.pubkey):
            raise no_account(self._terms, call, parsed.pubkey)
        if require_funds and self.unfunded is not None and (refusal := self.unfunded(parsed.pubkey)) is not None:
            raise refusal
        claim = await self._nonces.claim(parsed.pubkey, parsed.nonce, parsed.timestamp)
        if claim is Claim.REPLAYED:
            raise nonce_reused()
        if claim is Claim.BEFORE_RESTART:
            raise auth_failed("X-Timestamp predates the nonce store's last restart; sign again with the current time")
        return Identity(parsed.pubkey, "wallet")


async def has_account(accounts: AccountStore, no_accounts: NoAccounts, pubkey: str) -> bool:
    """Whether ``pubkey`` has an account record: a remembered "no" answers without a query, and a query's
    "no" is remembered (:class:`NoAccounts`); the store caches a "yes" itself."""
    if no_accounts.known(pubkey):
        return False
    generation = no_accounts.generation
    if await accounts.exists(pubkey):
        return True
    no_accounts.remember(pubkey, generation)
    return False


class SessionStrategy:
    kind = "session"

    def __init__(self, sessions: SessionStore) -> None:
        self._sessions = sessions

    def supports(self, credentials: Credentials) -> bool:
        return credentials.authorization is not None

    async def authenticate(
        self, credentials: Credentials, call: Call, *, require_account: bool, require_funds: bool = False
    ) -> Identity:
        assert credentials.authorization is not None
        token = bearer_token(credentials.authorization)
        if token is None:
            raise auth_failed("Authorization must be 'Bearer <session token>'")
        if token.startswith(KEY_PREFIX):
            raise auth_failed(API_KEY_AS_BEARER)
        try:
            return await resolve_session(self._sessions, token)
        except ProxyError as exc:
            if is_api_key_format(token):  # a legacy hex API key looks like a session token
                raise auth_failed(f"{exc.message}; {API_KEY_AS_BEARER}") from exc
            raise


async def resolve_session(sessions: SessionStore, token: str) -> Identity:
    if not _SESSION_TOKEN.fullmatch(token):
        raise auth_failed("session token is invalid, expired or logged out")
    resolved = await sessions.resolve(token)
    if resolved is None:
        raise auth_failed("session token is invalid, expired or logged out")
    return Identity(resolved.pubkey, "session", owner_session=resolved.owner)


class TokenStrategy:
    """gRPC ``x-token``: an API key, or else a session token (a legacy 64-hex key is tried as a key first)."""

    kind = "token"

    def __init__(self, keys: ApiKeyStore, sessions: SessionStore) -> None:
        self._keys = keys
        self._sessions = sessions

    def supports(self, credentials: Credentials) -> bool:
        return credentials.token is not None

    async def authenticate(
        self, credentials: Credentials, call: Call, *, require_account: bool, require_funds: bool = False
    ) -> Identity:
        token = credentials.token
        assert token is not None
        if is_api_key_format(token):
            pubkey = await self._keys.lookup(token)
            if pubkey is not None:
                return Identity(pubkey, "api_key")
        if _SESSION_TOKEN.fullmatch(token):
            return await resolve_session(self._sessions, token)
        raise auth_failed("x-token is not a valid API key or session token")

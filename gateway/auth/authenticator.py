"""The strategies composed in docs/api.md's priority order, plus the 402 rules. Transport-neutral.

    the call's credentials (as its transport extracted them) -> the first strategy that supports them decides:
        API key  >  wallet signature (any X-Pubkey/X-Signature/X-Timestamp/X-Nonce header)  >  bearer
    none at all                      -> 402 -32002 with the payment terms
    invalid                          -> 401 AUTH_FAILED (403 NONCE_REUSED for a replayed nonce)
    proven, but no account record    -> 402 -32002 (when the route needs an account); the "no" is
                                        remembered briefly (gateway.auth.cache.NoAccounts)
    too many failures from the address -> 429 RATE_LIMITED with Retry-After, before any lookup
                                          (gateway.auth.failures); a proven key without an account
                                          counts as one: its 402 costs work too (a signature check,
                                          a store query while it is not remembered)

The first supporting strategy decides alone: a bad API key is not rescued by a good bearer token,
which would make the priority order meaningless.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

from gateway.auth.api_keys import ApiKeyStore
from gateway.auth.cache import NoAccounts
from gateway.auth.errors import bearer_token_required, wallet_signature_required
from gateway.auth.failures import FailedAuths
from gateway.auth.payment_terms import PaymentTerms, no_account, resource_url
from gateway.auth.store.accounts import AccountStore
from gateway.auth.strategies import Strategy, has_account
from gateway.core.credentials import Credentials
from gateway.core.errors import ProxyError, RpcCode
from gateway.core.identity import Identity
from gateway.pipeline.stages import Call

Only = Literal["wallet", "session"]

_IDENTITY_MEMO = 10_000  # bounded; clearing it only costs rebuilding identities


class Authenticator:
    def __init__(
        self,
        strategies: Sequence[Strategy],
        accounts: AccountStore,
        terms: PaymentTerms,
        api_keys: ApiKeyStore | None = None,
        failures: FailedAuths | None = None,
        no_accounts: NoAccounts | None = None,
    ) -> None:
        self.strategies = tuple(strategies)
        self.failures = failures
        #: Keys found without an account (shared with the wallet strategy by :class:`AuthServices`).
        self.no_accounts = NoAccounts() if no_accounts is None else no_accounts
        self.accounts = accounts
        self.terms = terms
        self.api_keys = api_keys  # for :meth:`from_cache`
        self._identities: dict[str, Identity] = {}

    def from_cache(self, call: Call) -> Identity | None:
        """The identity of a call whose API key this replica has cached as active, without an await;
        None sends the call through :meth:`authenticate`. It is the answer that would give, since an
        API key outranks every other credential and implies an account."""
        key = call.credentials.api_key
        if key is None or self.api_keys is None:
            return None
        pubkey = self.api_keys.cached(key)
        if pubkey is None:
            return None
        identity = self._identities.get(pubkey)
        if identity is None:  # one immutable Identity per key owner, not one per call
            if len(self._identities) >= _IDENTITY_MEMO:
                self._identities.clear()
            identity = self._identities[pubkey] = Identity(pubkey, "api_key")
        return identity

    def select(self, credentials: Credentials) -> Strategy | None:
        return next((s for s in self.strategies if s.supports(credentials)), None)

    async def authenticate(
        self, call: Call, *, require_account: bool = True, require_funds: bool = False, only: Only | None = None
    ) -> Identity:
        """Prove who is calling or raise; ``only`` restricts the route to one kind of credential;
        ``require_funds``: the route bills its calls (:class:`gateway.auth.strategies.Strategy`)."""
        credentials = call.credentials
        strategy = self.select(credentials)
        if strategy is None:
            if only == "session":
                raise bearer_token_required()
            raise self.terms.error("Payment required: no credentials presented", resource_url(call))
        if only is not None and strategy.kind != only:
            raise _only_error(only)
        address = None
        if self.failures is not None:
            address = self.failures.address(call)
            self.failures.check(address)
        try:
            identity = await strategy.authenticate(
                credentials, call, require_account=require_account, require_funds=require_funds
            )
            # An API key implies an account (the key row references it); the wallet strategy looked already.
            session = require_account and identity.mode == "session"
            if session and not await has_account(self.accounts, self.no_accounts, identity.pubkey):
                raise no_account(self.terms, call, identity.pubkey)
        except ProxyError as exc:
            if self.failures is not None and address is not None and _counts_as_failure(exc):
                self.failures.failed(address)
            raise
        return identity


def _counts_as_failure(exc: ProxyError) -> bool:
    """Bad credentials (401), or proven ones without an account (402 -32002): both are work for nothing."""
    return exc.status == 401 or (exc.status == 402 and exc.rpc_code == RpcCode.PAYMENT_REQUIRED)


def _only_error(only: Only) -> ProxyError:
    return wallet_signature_required() if only == "wallet" else bearer_token_required()

"""API keys: generation, keyed hashing, lookup with a replica-local cache, and rotation.

Only ``HMAC-SHA256(secret, key)`` is stored (``api_keys.key_hash``); the key is shown once.

Looking a key up in PostgreSQL on every request would put a database round trip on the hot path, so
each replica caches ``key_hash -> pubkey`` (bounded, 60 s), and memoises ``key -> key_hash`` so a
repeat call does not recompute the HMAC (the replica sees each key in every request anyway). A
rotation must nevertheless refuse the old key on every replica at once, which a TTL alone cannot
give. So:

* rotation publishes each revoked hash on a Redis channel (:mod:`gateway.storage.channels`) right after its
  transaction commits; every replica subscribes at start-up and drops the hash from its cache;
* a replica serves from its cache only while that subscription is live. When it drops, the cache is
  cleared and lookups go to PostgreSQL until it is back (and cleared again on resubscription, since
  messages published meanwhile were missed);
* a lookup that raced with an invalidation does not store its (possibly stale) answer: every
  invalidation bumps a generation counter that the lookup compares before caching;
* "no such key" is cached for one second only, so a fresh key is never refused for long, and in a
  small cache of its own (:data:`NEGATIVE_ENTRIES`): a spray of made-up keys cannot push real keys out
  of theirs. (Failed authentications per client address are bounded too: :mod:`gateway.auth.failures`.)

The same channel carries session logouts (``session:<token digest>``), and every revocation heard is
handed on to :attr:`ApiKeyStore.revocations`, which ends the open connections that hold it
(:mod:`gateway.auth.revocations`).
"""

from __future__ import annotations

import asyncio
import base64
import hmac
import logging
import re
import secrets
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from gateway.auth.cache import TtlCache
from gateway.auth.revocations import Revocations
from gateway.auth.store.accounts import ApiKeyRows
from gateway.base.stopping import cancel_and_wait
from gateway.core.webhook_events import key_prefix
from gateway.storage.channels import Channel

log = logging.getLogger(__name__)

KEY_PREFIX = "srpc_live_"
POSITIVE_TTL_S = 60.0
NEGATIVE_TTL_S = 1.0
#: Unknown keys remembered at once (each for NEGATIVE_TTL_S): a repeated bad key costs no lookup.
NEGATIVE_ENTRIES = 1_000
_NEW_FORMAT = re.compile(r"srpc_live_[A-Za-z0-9_-]{43}")  # base64url of 32 bytes, no padding
_LEGACY_FORMAT = re.compile(r"[0-9a-fA-F]{64}")
#: A logout's message on the channel: this prefix, then the session token's digest (hex).
SESSION_MESSAGE_PREFIX = "session:"


def generate_api_key() -> str:
    """``srpc_live_`` + base64url (no padding) of 32 random bytes."""
    return KEY_PREFIX + base64.urlsafe_b64encode(secrets.token_bytes(32)).rstrip(b"=").decode("ascii")


def is_api_key_format(key: str) -> bool:
    """Whether ``key`` could be a key at all (new or legacy hex): anything else is refused without a lookup."""
    return bool(_NEW_FORMAT.fullmatch(key) or _LEGACY_FORMAT.fullmatch(key))


def hash_api_key(secret: bytes, key: str) -> bytes:
    return hmac.digest(secret, key.encode("ascii"), "sha256")  # one-shot: no HMAC object per request


@dataclass(frozen=True, slots=True)
class ApiKeyRotated:
    """The ``api_key.rotated`` lifecycle event, as the in-process hook gets it after commit: a new key is
    active for ``pubkey``. (Its webhook jobs are written in the rotation's own transaction.)"""

    pubkey: str
    at: float  # Unix seconds
    replaced_previous: bool  # False for an account's first key

    event: str = "api_key.rotated"


RotationHook = Callable[[ApiKeyRotated], Awaitable[None]]


async def _no_hook(event: ApiKeyRotated) -> None:
    return None


class ApiKeyStore:
    def __init__(
        self,
        rows: ApiKeyRows,
        channel: Channel,
        secret: bytes,
        *,
        on_rotated: RotationHook | None = None,
        revocations: Revocations | None = None,
        cache_size: int = 10_000,
        positive_ttl_s: float = POSITIVE_TTL_S,
        negative_ttl_s: float = NEGATIVE_TTL_S,
    ) -> None:
        self._rows = rows
        self._channel = channel
        self.revocations = revocations or Revocations()  # the process's open connections, by credential
        self._secret = secret
        self.on_rotated: RotationHook = on_rotated or _no_hook
        self._cache: TtlCache[bytes, str] = TtlCache(cache_size)  # active keys only
        self._unknown: TtlCache[bytes, None] = TtlCache(NEGATIVE_ENTRIES)  # "no such key", briefly
        self._cache_size = cache_size
        self._digests: dict[str, bytes] = {}  # key -> HMAC; only keys found to exist (digest() aside)
        self._positive_ttl_s = positive_ttl_s
        self._negative_ttl_s = negative_ttl_s
        self._generation = 0
        self._live = False
        self._subscribed = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    @property
    def cache_live(self) -> bool:
        """Whether the invalidation subscription is up (and so the cache may be used)."""
        return self._live

    async def start(self, subscribe_timeout_s: float = 5.0) -> None:
        """Subscribe to invalidations; wait for the subscription so no rotation is missed after start."""
        if self._task is None:
            follow = self._channel.follow(self._on_live, self._on_revoked, self._go_dark)
            self._task = asyncio.get_running_loop().create_task(follow)
        try:
            await asyncio.wait_for(self._subscribed.wait(), subscribe_timeout_s)
        except TimeoutError:
            log.warning("API-key invalidation channel not subscribed yet; lookups bypass the cache until it is")

    async def stop(self) -> None:
        task, self._task = self._task, None
        await cancel_and_wait(task)
        self._go_dark()

    def cached(self, key: str) -> str | None:
        """The owner of ``key`` when this replica has it cached as active (no await), else None: then
        :meth:`lookup` decides. Only a key seen before is looked at, so nothing is hashed here."""
        digest = self._digests.get(key)
        if digest is None or not self._live:
            return None
        return self._cache.get(digest)[1]

    async def lookup(self, key: str) -> str | None:
        """The public key owning the active key ``key``, or None (unknown, revoked, or not a key)."""
        digest = self._digests.get(key)
        known = digest is not None
        if digest is None:
            if not is_api_key_format(key):
                return None
            digest = hash_api_key(self._secret, key)  # memoised below only for a key that exists
        if self._live:
            hit, pubkey = self._cache.get(digest)
            if hit or self._unknown.get(digest)[0]:
                if pubkey is not None and not known:
                    self._remember(key, digest)
                return pubkey
        generation = self._generation
        pubkey = await self._rows.owner(digest)
        if pubkey is not None and not known:  # made-up keys never push real ones out of the memo
            self._remember(key, digest)
        if self._live and generation == self._generation:
            if pubkey is None:
                self._unknown.put(digest, None, self._negative_ttl_s)
            else:
                self._cache.put(digest, pubkey, self._positive_ttl_s)
        return pubkey

    async def rotate(self, pubkey: str, ref_code: str | None) -> str:
        """Issue a new key for ``pubkey``, creating its account if missing; revoke the previous key.

        The revocation is published after the commit (publishing before would let another replica
        re-cache the old key from a not-yet-committed database). If the publish fails the request
        fails with 503: the caller retries, and never holds a key whose predecessor might still be
        honoured from some replica's cache.
        """
        key = generate_api_key()
        hashes = await self._rows.rotate(pubkey, ref_code, hash_api_key(self._secret, key), key_prefix(key))
        for digest in hashes:
            self._invalidate(digest)
            self.revocations.revoked(("key", digest.hex()))
        try:
            await self._channel.publish([digest.hex() for digest in hashes])
        except Exception:
            log.error("could not publish the API-key revocation of %s", pubkey)
            raise
        try:
            await self.on_rotated(ApiKeyRotated(pubkey, time.time(), bool(hashes)))
        except Exception:  # the key exists now: a hook failure must not hide it from its owner
            log.exception("api_key.rotated hook failed for %s", pubkey)
        return key

    async def owner_of_digest(self, digest: bytes) -> str | None:
        """The owner of the active key with this stored hash, from PostgreSQL (never the cache)."""
        return await self._rows.owner(digest)

    def digest(self, key: str) -> bytes:
        """The stored hash of ``key`` (memoised, as for lookups)."""
        return self._digests.get(key) or self._remember_digest(key)

    async def publish_logout(self, session_digest: str) -> None:
        """Tell every process that a session was logged out (its open connections end)."""
        await self.publish_logouts([session_digest])

    async def publish_logouts(self, session_digests: list[str]) -> None:
        """:meth:`publish_logout` for several sessions, in one message to the channel."""
        if not session_digests:
            return
        for digest in session_digests:
            self.revocations.revoked(("session", digest))
        await self._channel.publish([SESSION_MESSAGE_PREFIX + digest for digest in session_digests])

    def _remember_digest(self, key: str) -> bytes:
        """HMAC of ``key``, memoised: the hash is a pure function of the key, so the memo is never stale
        and needs no invalidation; it saves the HMAC (and the format check) on every repeat call."""
        digest = hash_api_key(self._secret, key)
        self._remember(key, digest)
        return digest

    def _remember(self, key: str, digest: bytes) -> None:
        if len(self._digests) >= self._cache_size:
            self._digests.clear()  # bounded; dropping the memo only costs recomputation
        self._digests[key] = digest

    def _invalidate(self, digest: bytes) -> None:
        self._generation += 1
        self._cache.pop(digest)
        self._unknown.pop(digest)

    def _invalidate_all(self) -> None:
        self._generation += 1
        self._cache.clear()
        self._unknown.clear()

    def _on_live(self) -> None:
        """(Re)subscribed: messages may have been missed while away, so start from an empty cache."""
        self._invalidate_all()
        if self._subscribed.is_set():  # a resubscription: open connections' credentials are checked again
            self.revocations.resync()
        self._live = True
        self._subscribed.set()

    def _on_revoked(self, message: str) -> None:
        if self.revocations.on_message(message):  # an account suspended or resumed (its connections end)
            return
        if message.startswith(SESSION_MESSAGE_PREFIX):
            self.revocations.revoked(("session", message[len(SESSION_MESSAGE_PREFIX) :]))
            return
        try:
            digest = bytes.fromhex(message)
        except ValueError:
            log.warning("malformed API-key revocation message %r", message[:80])
            self._invalidate_all()  # cannot tell which key was meant: forget them all
            self.revocations.resync()
            return
        self._invalidate(digest)
        self.revocations.revoked(("key", digest.hex()))

    def _go_dark(self) -> None:
        self._live = False
        self._invalidate_all()

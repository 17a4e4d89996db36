"""Session challenges and tokens, in Redis with TTLs so every replica sees them and nothing leaks.

    challenge:{pubkey}:{challenge}  -> 1                    PX 300 s, removed by GETDEL on the verify that uses it
    session:{sha256(token)}         -> "o:"|"s:" + pubkey   PX 3600 s, slid on every use, DEL when ended
    sessions:{pubkey}               -> HASH sha256(token) -> {"o", "c", "origin", "ua"} (JSON)
                                       PX 3600 s, set on every use of any of its sessions

A session is an owner session (``o:``, made from a Sign-In With Solana message naming this gateway's
domain) or an ordinary one (``s:``, from the plain hex challenge). A value without either prefix was
written before sessions were indexed: it resolves to nothing, so every live session is listed.

``sessions:{pubkey}`` indexes the account's sessions, so the owner can list them and end them: ``o``
owner or not, ``c`` created (Unix ms), the ``origin`` and user agent (``ua``) they were made from.
Using a session slides its own key and the index's in one script (one round trip), so the index
outlives its last session by at most one lifetime; its entries whose session has expired are dropped
whenever it is read or written, and it holds at most ``max_sessions`` live ones: a new session past
the cap ends the account's oldest ordinary session, or, for an owner session when all are owner
sessions, the oldest owner session; an ordinary session never ends an owner session (it is refused
instead, :class:`SessionCapFull`). The scripts name the index key from the session's value, so the
store needs one Redis (not Redis Cluster), as the rest of the gateway does. When "last used" is
asked, it is read from the session's remaining TTL: nothing more is written per use.

The challenge key holds the public key, so only a verify that already proved the signature for that
key can consume it: nobody can burn somebody else's challenge. Tokens are stored as their SHA-256 so
that a Redis dump does not hand out live sessions; the token has 256 random bits, so an unkeyed hash
is enough. A session's public id (:func:`session_id`) is a hash of that digest, so that what the
account page shows is not even the key Redis holds the session under.
"""

from __future__ import annotations

import hashlib
import math
import secrets
import time
from dataclasses import dataclass

import orjson
import redis.asyncio as aioredis

from gateway.storage.errors import redis_errors

WHAT = "the session store"
CHALLENGE_TTL_MS = 300_000
TOKEN_TTL_MS = 3_600_000
#: Live sessions an account keeps at once (docs/api.md, Account and session routes).
MAX_SESSIONS = 20
#: The longest user agent and origin kept for a session's listing (the rest is cut off).
MAX_ORIGIN_CHARS = 256
MAX_USER_AGENT_CHARS = 256
OWNER, ORDINARY = "o:", "s:"

# KEYS[1] session:{digest}; ARGV ttl_ms, the index key's prefix. Slides the session and its account's index.
_RESOLVE = """
local value = redis.call('GET', KEYS[1])
if not value then return false end
redis.call('PEXPIRE', KEYS[1], ARGV[1])
local kind = string.sub(value, 1, 2)
if kind == 'o:' or kind == 's:' then
  redis.call('PEXPIRE', ARGV[2] .. string.sub(value, 3), ARGV[1])
end
return value
"""

# KEYS[1] sessions:{pubkey}, KEYS[2] session:{new digest}; ARGV new digest, value, record, ttl_ms, cap,
# owner (1/0), the session key's prefix. Drops expired entries, ends sessions past the cap, adds the new one.
# Returns {0, ended digests...} or {1, ms until the oldest owner session expires} when refused.
_CREATE = """
local entries = redis.call('HGETALL', KEYS[1])
local live = {}
for i = 1, #entries, 2 do
  local digest = entries[i]
  if redis.call('EXISTS', ARGV[7] .. digest) == 1 then
    local record = cjson.decode(entries[i + 1])
    table.insert(live, {digest, record['o'] == 1, record['c'] or 0})
  else
    redis.call('HDEL', KEYS[1], digest)
  end
end
table.sort(live, function(a, b) return a[3] < b[3] end)
local ended = {}
local cap = tonumber(ARGV[5])
local owner = ARGV[6] == '1'
while #live >= cap do
  local victim = nil
  for i = 1, #live do
    if not live[i][2] then victim = i break end
  end
  if victim == nil then
    if not owner then
      return {1, redis.call('PTTL', ARGV[7] .. live[1][1])}
    end
    victim = 1
  end
  local digest = live[victim][1]
  redis.call('DEL', ARGV[7] .. digest)
  redis.call('HDEL', KEYS[1], digest)
  table.insert(ended, digest)
  table.remove(live, victim)
end
redis.call('SET', KEYS[2], ARGV[2], 'PX', ARGV[4])
redis.call('HSET', KEYS[1], ARGV[1], ARGV[3])
redis.call('PEXPIRE', KEYS[1], ARGV[4])
local answer = {0}
for i = 1, #ended do table.insert(answer, ended[i]) end
return answer
"""


def token_digest(token: str) -> str:
    return hashlib.sha256(token.encode("utf-8", "surrogateescape")).hexdigest()


def session_id(digest: str) -> str:
    """The id a session is listed and ended by: 80 bits of a hash of its token's digest. Knowing it
    proves nothing and names no Redis key; it only picks one of the account's own sessions."""
    return hashlib.sha256(b"session-id:" + digest.encode("ascii")).hexdigest()[:20]


@dataclass(frozen=True, slots=True)
class Resolved:
    pubkey: str
    owner: bool


@dataclass(frozen=True, slots=True)
class SessionInfo:
    """One live session as its account lists it (never its token or the token's digest)."""

    id: str
    digest: str  # for ending it and telling the caller's own apart; not shown
    owner: bool
    created_ms: int
    last_used_ms: int
    origin: str | None
    user_agent: str | None


class SessionCapFull(Exception):
    """Every live session of the account is an owner session and the cap is reached: an ordinary one is
    refused (it never ends an owner session). ``retry_after_s``: when the oldest would expire unused."""

    def __init__(self, retry_after_s: int) -> None:
        super().__init__(f"all {MAX_SESSIONS} live sessions are owner sessions")
        self.retry_after_s = retry_after_s


class SessionStore:
    def __init__(
        self,
        redis: aioredis.Redis,
        challenge_ttl_ms: int = CHALLENGE_TTL_MS,
        token_ttl_ms: int = TOKEN_TTL_MS,
        max_sessions: int = MAX_SESSIONS,
    ) -> None:
        self._redis = redis
        self.challenge_ttl_ms = challenge_ttl_ms
        self.token_ttl_ms = token_ttl_ms
        self.max_sessions = max_sessions
        self._resolve = redis.register_script(_RESOLVE)
        self._create = redis.register_script(_CREATE)

    @property
    def challenge_expires_in(self) -> int:
        return math.ceil(self.challenge_ttl_ms / 1000)

    @property
    def token_expires_in(self) -> int:
        return math.ceil(self.token_ttl_ms / 1000)

    async def issue_challenge(self, pubkey: str) -> str:
        challenge = secrets.token_hex(32)
        async with redis_errors(WHAT):
            await self._redis.set(f"challenge:{pubkey}:{challenge}", b"1", px=self.challenge_ttl_ms)
        return challenge

    async def consume_challenge(self, pubkey: str, challenge: str) -> bool:
        """True once for a live challenge issued to ``pubkey``; False if expired, used or never issued."""
        async with redis_errors(WHAT):
            found = await self._redis.getdel(f"challenge:{pubkey}:{challenge}")
        return found is not None

    async def issue_token(self, pubkey: str) -> str:
        """An ordinary session's token, for tools and tests: the sessions it ends past the cap are not
        announced (their connections end at the next re-check); the verify route uses :meth:`open`."""
        token, _ = await self.open(pubkey)
        return token

    async def open(
        self, pubkey: str, *, owner: bool = False, origin: str | None = None, user_agent: str | None = None
    ) -> tuple[str, list[str]]:
        """A new session's token, and the digests of the sessions it ended (past the cap), which the
        caller announces as logged out; raises :class:`SessionCapFull`."""
        token = secrets.token_hex(32)
        digest = token_digest(token)
        record = {
            "o": 1 if owner else 0,
            "c": int(time.time() * 1000),
            "origin": origin[:MAX_ORIGIN_CHARS] if origin else None,
            "ua": user_agent[:MAX_USER_AGENT_CHARS] if user_agent else None,
        }
        value = (OWNER if owner else ORDINARY) + pubkey
        args: list[str | bytes | int] = [
            digest,
            value,
            orjson.dumps(record),
            self.token_ttl_ms,
            self.max_sessions,
            int(owner),
            "session:",
        ]
        async with redis_errors(WHAT):
            answer = await self._create(keys=[f"sessions:{pubkey}", f"session:{digest}"], args=args)
        if int(answer[0]) == 1:
            raise SessionCapFull(max(1, math.ceil(int(answer[1]) / 1000)))
        return token, [_text(ended) for ended in answer[1:]]

    async def resolve(self, token: str) -> Resolved | None:
        """The token's account and kind, sliding its TTL and its index's in the same round trip; None
        if unknown (or written before sessions were indexed)."""
        async with redis_errors(WHAT):
            value = await self._resolve(keys=[f"session:{token_digest(token)}"], args=[self.token_ttl_ms, "sessions:"])
        if value is None:
            return None
        text = _text(value)
        if text.startswith(OWNER):
            return Resolved(text[len(OWNER) :], True)
        if text.startswith(ORDINARY):
            return Resolved(text[len(ORDINARY) :], False)
        return None

    async def live(self, digest: str) -> bool:
        """Whether the session whose token has this digest is still valid (its TTL is not slid)."""
        async with redis_errors(WHAT):
            return bool(await self._redis.exists(f"session:{digest}"))

    async def revoke(self, token: str, pubkey: str | None = None) -> bool:
        """End one session by its token (and drop it from ``pubkey``'s index when given)."""
        return bool(await self.end(pubkey, [token_digest(token)]))

    async def end(self, pubkey: str | None, digests: list[str]) -> int:
        """End sessions by digest; how many were live."""
        if not digests:
            return 0
        async with redis_errors(WHAT), self._redis.pipeline(transaction=True) as pipe:
            pipe.delete(*(f"session:{digest}" for digest in digests))
            if pubkey is not None:
                pipe.hdel(f"sessions:{pubkey}", *digests)
            removed = (await pipe.execute())[0]
        return int(removed)

    async def sessions(self, pubkey: str) -> list[SessionInfo]:
        """The account's live sessions, newest first; entries of expired ones are dropped."""
        index = f"sessions:{pubkey}"
        async with redis_errors(WHAT):
            entries = await self._redis.hgetall(index)
            digests = [_text(digest) for digest in entries]
            if not digests:
                return []
            async with self._redis.pipeline(transaction=False) as pipe:
                for digest in digests:
                    pipe.pttl(f"session:{digest}")
                ttls = await pipe.execute()
            gone = [digest for digest, ttl in zip(digests, ttls, strict=True) if int(ttl) < 0]
            if gone:
                await self._redis.hdel(index, *gone)
        now_ms = int(time.time() * 1000)
        found: list[SessionInfo] = []
        for (raw_digest, raw_record), ttl in zip(entries.items(), ttls, strict=True):
            if int(ttl) < 0:
                continue
            digest, record = _text(raw_digest), orjson.loads(raw_record)
            created = int(record.get("c", 0))
            last_used = max(created, now_ms - (self.token_ttl_ms - int(ttl)))
            found.append(
                SessionInfo(
                    session_id(digest),
                    digest,
                    record.get("o") == 1,
                    created,
                    last_used,
                    record.get("origin"),
                    record.get("ua"),
                )
            )
        found.sort(key=lambda info: info.created_ms, reverse=True)
        return found


def _text(value: bytes | str) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)

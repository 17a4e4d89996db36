"""Handlers of the session and account endpoints, as pipeline endpoints (``Call -> Reply``).

Transport-neutral: :mod:`gateway.auth.routes` mounts them on HTTP behind
``error_boundary`` (and ``AuthStage`` where docs/api.md asks for credentials). Request bodies are small
JSON objects; anything else is 400 INVALID_REQUEST, a failed proof is 401 AUTH_FAILED.

Balances: ``accounts.balance`` as the ledger last settled it, less what this replica has spent and
not yet settled, both read as of one moment (:class:`SettledRead`: a settle between the two reads
would count a call twice or not at all), so the balance is what this replica's last
``X-Credits-Remaining`` said; other replicas' unsettled usage shows within one flush interval.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from typing import Any, Protocol, TypeVar

import base58
import orjson

from gateway.auth.account_views import account_document, history_entry, ledger_entry
from gateway.auth.errors import (
    account_suspended,
    bearer_token_required,
    not_started,
    owner_proof_required,
    sessions_full,
)
from gateway.auth.paging import page_document, parse_page
from gateway.auth.services import AuthServices
from gateway.auth.sign_in import MAX_MESSAGE_BYTES, SignInError, iso, sign_in_input
from gateway.auth.sign_in import check as check_sign_in
from gateway.auth.sign_in import parse as parse_sign_in
from gateway.auth.store.sessions import SessionCapFull, SessionInfo, token_digest
from gateway.auth.usage_totals import UsageEndpoints
from gateway.core.credentials import bearer_token
from gateway.core.errors import account_not_found, auth_failed, invalid_request, not_found
from gateway.core.identity import Identity
from gateway.core.wallet_headers import HeaderFailure, decode_base58, verify_signature
from gateway.pipeline.stages import Call, Reply, json_reply
from gateway.storage.errors import StoreUnavailable
from gateway.storage.seats import Seats

log = logging.getLogger(__name__)
T = TypeVar("T")
R = TypeVar("R")
_CHALLENGE = re.compile(r"[0-9a-f]{64}")
_SESSION_ID = re.compile(r"[0-9a-f]{20}")
MAX_REF_CODE_LEN = 128
API_KEY_MESSAGE = "Store this API key now: it is shown only once. Any previous key of this account is revoked."


def _ready(value: T | None) -> T:
    if value is None:
        raise not_started()
    return value


def _json_object(body: bytes, *, empty_ok: bool = False) -> dict[str, Any]:
    if not body.strip() and empty_ok:
        return {}
    try:
        parsed = orjson.loads(body)
    except orjson.JSONDecodeError as exc:
        raise invalid_request("body must be a JSON object (valid UTF-8 JSON)") from exc
    if not isinstance(parsed, dict):
        raise invalid_request("body must be a JSON object")
    return parsed


def _string_field(document: dict[str, Any], name: str) -> str:
    value = document.get(name)
    if not isinstance(value, str):
        raise invalid_request(f"{name} is required and must be a string")
    return value


def _pubkey_field(document: dict[str, Any]) -> tuple[str, bytes]:
    decoded = decode_base58(_string_field(document, "pubkey"), 32, "pubkey")
    if isinstance(decoded, HeaderFailure):
        raise invalid_request(decoded.reason)
    return base58.b58encode(decoded).decode("ascii"), decoded


def _owner(call: Call, action: str) -> Identity:
    """The caller, if it proved the wallet itself (a signature or an owner session); else 403."""
    identity = call.authenticated()
    if not identity.owner:
        raise owner_proof_required(action)
    return identity


def _own_session(call: Call, identity: Identity) -> str | None:
    """The digest of the session token the call came with, if it came with one."""
    if identity.mode != "session":
        return None
    authorization = call.credentials.authorization
    token = bearer_token(authorization) if authorization else call.credentials.token
    return token_digest(token) if token else None


def _session_document(info: SessionInfo, own: str | None) -> dict[str, Any]:
    return {
        "id": info.id,
        "owner": info.owner,
        "created_at": iso(datetime.fromtimestamp(info.created_ms / 1000, UTC)),
        "last_used_at": iso(datetime.fromtimestamp(info.last_used_ms / 1000, UTC)),
        "origin": info.origin,
        "user_agent": info.user_agent,
        "current": info.digest == own,
    }


class SettledRead(Protocol):
    """A read of the account at the store with this replica's unsettled usage of it, as of one moment
    (:meth:`gateway.credits.meter.Meter.settled_read`; a callable: auth does not import credits)."""

    def __call__(self, pubkey: str, read_stored: Callable[[], Awaitable[R]]) -> Awaitable[tuple[R, int]]: ...


async def _nothing_unsettled(pubkey: str, read_stored: Callable[[], Awaitable[R]]) -> tuple[R, int]:
    """Without a meter: the store's answer, nothing unsettled."""
    return await read_stored(), 0


class AccountEndpoints:
    def __init__(
        self,
        services: AuthServices,
        seats: Seats,
        settled_read: SettledRead = _nothing_unsettled,
        class_of: Callable[[str], str | None] = lambda method: None,
    ) -> None:
        self.services = services
        #: Where browsers reach the gateway: the domain a Sign-In With Solana message must name.
        self.public = services.settings.public_address
        self.settled_read = settled_read
        # the account page's totals and CSV routes (beyond docs/api.md); ``seats`` count running exports
        self.usage = UsageEndpoints(services, seats, class_of)  # ``class_of``: a method's class, for its totals

    async def challenge(self, call: Call) -> Reply:
        """``POST /auth/challenge {pubkey}`` -> ``{challenge, expires_in, sign_in}``; no auth. ``sign_in`` is
        the Sign-In With Solana input naming the challenge as its nonce, for the wallet's ``solana:signIn``."""
        pubkey, _ = _pubkey_field(_json_object(call.body))
        sessions = _ready(self.services.sessions)
        challenge = await sessions.issue_challenge(pubkey)
        expires_in = sessions.challenge_expires_in
        sign_in = sign_in_input(self.public, pubkey, challenge, datetime.now(UTC), expires_in)
        return json_reply(200, {"challenge": challenge, "expires_in": expires_in, "sign_in": sign_in})

    async def verify(self, call: Call) -> Reply:
        """``POST /auth/verify {pubkey, challenge, signature}`` (an ordinary session) or ``{pubkey, message,
        signature}`` (a Sign-In With Solana message naming this gateway: an owner session) -> ``{token,
        expires_in, owner}``; no auth.

        The signature is checked before the challenge is consumed, so only the key's owner can use
        (and so burn) a challenge issued to that key.
        """
        document = _json_object(call.body)
        pubkey, pubkey_bytes = _pubkey_field(document)
        owner = "message" in document
        if owner and "challenge" in document:
            raise invalid_request("send challenge (the hex challenge) or message (Sign-In With Solana), not both")
        if owner:
            signed, challenge = self._sign_in(_string_field(document, "message"), pubkey)
        else:
            challenge = _string_field(document, "challenge")
            if not _CHALLENGE.fullmatch(challenge):
                raise invalid_request("challenge must be the 64-character hex string from POST /auth/challenge")
            signed = challenge.encode("utf-8")
        signature = decode_base58(_string_field(document, "signature"), 64, "signature")
        if isinstance(signature, HeaderFailure):
            raise auth_failed(signature.reason)
        if not verify_signature(pubkey_bytes, signed, signature):
            what = "the message's UTF-8 bytes, as the wallet signed them" if owner else "the challenge's UTF-8 text"
            raise auth_failed(f"signature does not verify: sign {what} with the key's Ed25519 secret")
        sessions = _ready(self.services.sessions)
        if not await sessions.consume_challenge(pubkey, challenge):
            raise auth_failed("challenge expired, already used, or not issued to this public key")
        try:
            await self._not_suspended(pubkey)
        except StoreUnavailable:
            # Sessions live in Redis and are issued while PostgreSQL is down (docs/api.md, Errors). A session
            # grants a suspended account nothing: every paid call, connection and webhook action checks again.
            log.warning("session issued without the suspension check: the account database is unavailable")
        origin, user_agent = call.headers.get("origin"), call.headers.get("user-agent")
        try:
            token, ended = await sessions.open(pubkey, owner=owner, origin=origin, user_agent=user_agent)
        except SessionCapFull as exc:
            raise sessions_full(sessions.max_sessions, exc.retry_after_s) from exc
        await _ready(self.services.api_keys).publish_logouts(ended)  # past the cap: their sockets close too
        return json_reply(200, {"token": token, "expires_in": sessions.token_expires_in, "owner": owner})

    def _sign_in(self, text: str, pubkey: str) -> tuple[bytes, str]:
        """The bytes the wallet signed and the challenge they name, or 400 (not the sign-in text) / 401."""
        if len(text) > MAX_MESSAGE_BYTES:  # bounded before anything else looks at it
            raise invalid_request(f"message is longer than {MAX_MESSAGE_BYTES} bytes")
        try:
            signed = text.encode("utf-8")
        except UnicodeEncodeError as exc:
            raise invalid_request("message is not valid Unicode text") from exc
        try:
            parsed = parse_sign_in(text)
        except SignInError as exc:
            raise invalid_request(f"message is not a Sign-In With Solana text: {exc}") from exc
        try:
            nonce = check_sign_in(parsed, self.public, pubkey, datetime.now(UTC), self._challenge_ttl_s())
        except SignInError as exc:
            raise auth_failed(str(exc)) from exc
        if not _CHALLENGE.fullmatch(nonce):
            raise auth_failed("message's Nonce is not a challenge from POST /auth/challenge")
        return signed, nonce

    def _challenge_ttl_s(self) -> int:
        return _ready(self.services.sessions).challenge_expires_in

    async def logout(self, call: Call) -> Reply:
        """``POST /auth/logout {}`` with the bearer token (checked by AuthStage) -> ``{status: "ok"}``."""
        _json_object(call.body, empty_ok=True)
        authorization = call.credentials.authorization
        token = bearer_token(authorization) if authorization else None
        if token is None:
            raise bearer_token_required()
        await self.services.logout(token, call.authenticated().pubkey)
        return json_reply(200, {"status": "ok"})

    async def list_sessions(self, call: Call) -> Reply:
        """``GET /account/sessions`` (any credential) -> ``{sessions, max_sessions}``, newest first."""
        identity = call.authenticated()
        sessions = _ready(self.services.sessions)
        own = _own_session(call, identity)
        found = await sessions.sessions(identity.pubkey)
        listed = [_session_document(info, own) for info in found]
        return json_reply(200, {"sessions": listed, "max_sessions": sessions.max_sessions})

    async def end_sessions(self, call: Call) -> Reply:
        """``DELETE /account/sessions`` (wallet signature or owner session) -> ``{ok, ended}``: every live
        session of the account but the caller's own owner session."""
        _json_object(call.body, empty_ok=True)
        identity = _owner(call, "ending sessions")
        own = _own_session(call, identity)
        found = await _ready(self.services.sessions).sessions(identity.pubkey)
        digests = [info.digest for info in found if info.digest != own]
        await self.services.end_sessions(identity.pubkey, digests)
        return json_reply(200, {"ok": True, "ended": len(digests)})

    async def end_session(self, call: Call) -> Reply:
        """``DELETE /account/sessions/{id}`` (wallet signature or owner session) -> ``{ok, ended: 1}``;
        404 NOT_FOUND for an id that is not one of the account's live sessions."""
        _json_object(call.body, empty_ok=True)
        identity = _owner(call, "ending a session")
        wanted = call.path.rstrip("/").rsplit("/", 1)[-1]
        found = await _ready(self.services.sessions).sessions(identity.pubkey) if _SESSION_ID.fullmatch(wanted) else []
        match = next((info for info in found if info.id == wanted), None)
        if match is None:
            raise not_found("no live session of this account has that id (GET /account/sessions lists them)")
        await self.services.end_sessions(identity.pubkey, [match.digest])
        return json_reply(200, {"ok": True, "ended": 1})

    async def create_api_key(self, call: Call) -> Reply:
        """``POST /account/api-key {}`` or ``{ref_code}`` under wallet signature -> the key, shown once."""
        identity = call.authenticated()
        document = _json_object(call.body, empty_ok=True)
        ref_code = document.get("ref_code")
        if ref_code is not None and not isinstance(ref_code, str):
            raise invalid_request("ref_code must be a string")
        if ref_code is not None and len(ref_code) > MAX_REF_CODE_LEN:
            ref_code = None  # cannot be a known code; unknown codes are ignored silently
        await self._not_suspended(identity.pubkey)
        key = await _ready(self.services.api_keys).rotate(identity.pubkey, ref_code)
        return json_reply(200, {"ok": True, "api_key": key, "message": API_KEY_MESSAGE})

    async def _not_suspended(self, pubkey: str) -> None:
        """403 ACCOUNT_SUSPENDED: a suspended account gets no new key or session (reads stay open)."""
        if await _ready(self.services.accounts).suspended(pubkey):
            raise account_suspended()

    async def info(self, call: Call) -> Reply:
        """``GET /account/info`` -> the Account resource; 404 ACCOUNT_NOT_FOUND without a record."""
        pubkey = call.authenticated().pubkey
        accounts = _ready(self.services.accounts)
        record, unsettled = await self.settled_read(pubkey, lambda: accounts.get(pubkey))
        if record is None:
            raise account_not_found()
        document = account_document(
            record,
            balance=max(0, record.balance - unsettled),
            pending_send_credits=await accounts.pending_send_credits(pubkey),
            total_consumed=record.total_consumed + max(0, unsettled),
            funding=_ready(self.services.funding),
            last_deposit=await accounts.last_deposit(pubkey),
            batches=await accounts.live_batches(pubkey),
        )
        return json_reply(200, document)

    async def ledger(self, call: Call) -> Reply:
        """``GET /account/ledger?limit&cursor|offset`` -> ``{entries, next_cursor}``, newest first."""
        page = parse_page(call.query)
        pubkey = call.authenticated().pubkey
        accounts = _ready(self.services.accounts)
        if not await accounts.exists(pubkey):
            raise account_not_found()
        rows = await accounts.ledger(pubkey, page)
        last = rows[-1].id if rows else None
        return json_reply(200, page_document([ledger_entry(e) for e in rows], last, page))

    async def history(self, call: Call) -> Reply:
        """``GET /account/history?limit&cursor|offset`` -> ``{entries, next_cursor}``, newest first."""
        page = parse_page(call.query)
        pubkey = call.authenticated().pubkey
        accounts = _ready(self.services.accounts)
        if not await accounts.exists(pubkey):
            raise account_not_found()
        rows = await accounts.history(pubkey, page)
        last = rows[-1].id if rows else None
        return json_reply(200, page_document([history_entry(e) for e in rows], last, page))

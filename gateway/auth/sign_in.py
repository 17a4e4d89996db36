"""Sign-In With Solana: the message the gateway asks a wallet to sign, its parser and its checks (pure).

The Wallet Standard's ``solana:signIn`` takes a ``SolanaSignInInput`` (:func:`sign_in_input` builds it
for a challenge) and the wallet signs the text ``createSignInMessageText`` of
``@solana/wallet-standard-util`` writes from it (CAIP-122 / EIP-4361 for Solana)::

    {domain} wants you to sign in with your Solana account:
    {address}

    {statement}

    URI: {uri}
    Version: {version}
    Nonce: {nonce}
    Issued At: {issuedAt}
    Expiration Time: {expirationTime}

Statement and each field are optional in the format; the fields come in this order (between Version
and Nonce: Chain ID; after Expiration Time: Not Before, Request ID, Resources).

Hand-written because no Python library parses the Solana variant: the ``siwe`` packages parse the
Ethereum text ("... sign in with your Ethereum account", a checksummed 0x address) and nothing else.
The parser is strict where the reference's regular expression is loose: it takes exactly the text
``createSignInMessageText`` writes (tests/auth/test_sign_in.py proves it against the reference under
Node), refuses control characters other than the line feeds, and refuses the fields the gateway never
asks for (Chain ID, Not Before, Request ID, Resources): the Wallet Standard says a wallet must not add
a field its input did not have, so a message carrying one was not made from this gateway's input.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any
from urllib.parse import urlsplit

#: The most bytes of a signed message looked at (ours is about 400); larger is refused before parsing.
MAX_MESSAGE_BYTES = 2048
#: How far in the future a message's Issued At may be: the signer's clock may run ahead of ours.
CLOCK_SKEW_S = 60
VERSION = "1"
STATEMENT = "Sign in to the Solana RPC gateway to manage your account, its keys and its sessions."

_HEADER = " wants you to sign in with your Solana account:"
#: Fields in the order the reference writes them; those the gateway asks for and those it refuses.
_FIELD_ORDER = ("URI", "Version", "Chain ID", "Nonce", "Issued At", "Expiration Time", "Not Before", "Request ID")
_REFUSED = frozenset({"Chain ID", "Not Before", "Request ID", "Resources"})
_CONTROL = re.compile(r"[\x00-\x09\x0b-\x1f\x7f]")
_TIMESTAMP = re.compile(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d{1,9})?(Z|[+-]\d{2}:\d{2})")


class SignInError(ValueError):
    """A message that is not the sign-in text, or one that does not sign in here; ``str`` says why."""


@dataclass(frozen=True, slots=True)
class SignInMessage:
    domain: str
    address: str
    statement: str | None
    uri: str | None
    version: str | None
    nonce: str | None
    issued_at: str | None
    expiration_time: str | None


@dataclass(frozen=True, slots=True)
class PublicAddress:
    """Where browsers reach the gateway: ``origin`` (``scheme://host[:port]``) and ``domain`` (``host[:port]``)."""

    origin: str
    domain: str

    @classmethod
    def parse(cls, url: str) -> PublicAddress:
        """An ``http(s)://host[:port]`` URL (a trailing ``/`` allowed), its default port dropped; else ValueError."""
        parts = urlsplit(url.strip())
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"public_url must be http(s)://host[:port], not {url!r}")
        if parts.path not in ("", "/") or parts.query or parts.fragment or parts.username or parts.password:
            raise ValueError(f"public_url must be an origin (no path, query or user), not {url!r}")
        port = parts.port  # raises ValueError for a port that is not a number or out of range
        host = parts.hostname.lower()
        host = f"[{host}]" if ":" in host else host
        default = 443 if parts.scheme == "https" else 80
        domain = host if port in (None, default) else f"{host}:{port}"
        return cls(f"{parts.scheme}://{domain}", domain)

    @classmethod
    def listening(cls, host: str, port: int) -> PublicAddress:
        """The address of a gateway listening on ``host:port``, as a browser on the same machine reaches it."""
        if host in ("", "0.0.0.0", "::"):
            host = "127.0.0.1"
        return cls.parse(f"http://{f'[{host}]' if ':' in host else host}:{port}")


def iso(moment: datetime) -> str:
    """ISO 8601 in UTC with milliseconds and ``Z``, as JavaScript's ``toISOString`` writes it."""
    return moment.astimezone(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def sign_in_input(public: PublicAddress, pubkey: str, nonce: str, now: datetime, ttl_s: int) -> dict[str, Any]:
    """The ``SolanaSignInInput`` a page hands the wallet unchanged. No ``chainId``: a session signs in to
    this gateway, whatever network it serves, and a wallet may offer to switch networks for one."""
    return {
        "domain": public.domain,
        "address": pubkey,
        "statement": STATEMENT,
        "uri": public.origin,
        "version": VERSION,
        "nonce": nonce,
        "issuedAt": iso(now),
        "expirationTime": iso(now + timedelta(seconds=ttl_s)),
    }


def message_text(fields: dict[str, Any]) -> str:
    """What a wallet signs for a ``SolanaSignInInput``: the Python twin of the reference's
    ``createSignInMessageText`` (for clients and tests; the gateway only parses)."""
    text = f"{fields['domain']}{_HEADER}\n{fields['address']}"
    if fields.get("statement"):
        text += f"\n\n{fields['statement']}"
    names = {
        "uri": "URI",
        "version": "Version",
        "chainId": "Chain ID",
        "nonce": "Nonce",
        "issuedAt": "Issued At",
        "expirationTime": "Expiration Time",
        "notBefore": "Not Before",
        "requestId": "Request ID",
    }
    lines = [f"{label}: {fields[name]}" for name, label in names.items() if fields.get(name)]
    if fields.get("resources") is not None:
        lines += ["Resources:", *(f"- {resource}" for resource in fields["resources"])]
    if lines:
        text += "\n\n" + "\n".join(lines)
    return text


def parse(text: str) -> SignInMessage:
    """The fields of a sign-in message, or :class:`SignInError` naming what is wrong with its text."""
    if len(text) > MAX_MESSAGE_BYTES or len(text.encode("utf-8", "surrogatepass")) > MAX_MESSAGE_BYTES:
        raise SignInError(f"message is longer than {MAX_MESSAGE_BYTES} bytes")
    if _CONTROL.search(text):
        raise SignInError("message holds a control character other than a line feed")
    header, _, rest = text.partition("\n")
    address, newline, rest = rest.partition("\n")
    if not header.endswith(_HEADER) or not address:
        raise SignInError(f"message must start '<domain>{_HEADER}' then the address on the next line")
    domain = header[: -len(_HEADER)]
    if not domain or " " in domain:
        raise SignInError("message's domain is empty or holds a space")
    if " " in address:
        raise SignInError("message's address line holds a space")
    if newline and not rest.startswith("\n"):
        raise SignInError("the address must be followed by an empty line (or end the message)")
    blocks = rest[1:].split("\n\n") if newline else []
    fields: dict[str, str] = {}
    statement: str | None = None
    if blocks and _is_fields(blocks[-1]):
        fields = _fields(blocks.pop())
    if blocks:
        statement = "\n\n".join(blocks)
        if not statement or statement.startswith("\n") or statement.endswith("\n"):
            raise SignInError("message has an empty or misplaced line")
    return SignInMessage(
        domain=domain,
        address=address,
        statement=statement,
        uri=fields.get("URI"),
        version=fields.get("Version"),
        nonce=fields.get("Nonce"),
        issued_at=fields.get("Issued At"),
        expiration_time=fields.get("Expiration Time"),
    )


def _is_fields(block: str) -> bool:
    first = block.split("\n", 1)[0]
    return first == "Resources:" or any(first.startswith(f"{name}: ") for name in _FIELD_ORDER)


def _fields(block: str) -> dict[str, str]:
    fields: dict[str, str] = {}
    position = 0
    for line in block.split("\n"):
        if line == "Resources:" or line.startswith("- "):
            raise SignInError("message lists Resources, which this gateway never asks for")
        name, sep, value = line.partition(": ")
        if not sep or name not in _FIELD_ORDER or not value:
            raise SignInError(f"message has a line that is not a sign-in field: {line[:60]!r}")
        if _FIELD_ORDER.index(name) < position:
            raise SignInError(f"message's {name} is repeated or out of order")
        if name in _REFUSED:
            raise SignInError(f"message has a {name}, which this gateway never asks for: sign the sign_in unchanged")
        position = _FIELD_ORDER.index(name) + 1
        fields[name] = value
    return fields


def _moment(value: str | None, name: str) -> datetime:
    if value is None:
        raise SignInError(f"message has no {name}: sign the sign_in from POST /auth/challenge unchanged")
    if len(value) > 40 or not _TIMESTAMP.fullmatch(value):
        raise SignInError(f"message's {name} is not an ISO 8601 time with a zone")
    try:
        return datetime.fromisoformat(value[:-1] + "+00:00" if value.endswith("Z") else value)
    except ValueError as exc:
        raise SignInError(f"message's {name} is not a valid time") from exc


def check(message: SignInMessage, public: PublicAddress, pubkey: str, now: datetime, max_age_s: int) -> str:
    """The message's nonce if it signs ``pubkey`` in to this gateway now; else :class:`SignInError`.

    The domain is the configured public address, never the request's ``Host``: the wallet compared it
    with the page's origin, and a hostile page cannot make it name a domain it is not on.
    """
    if message.domain != public.domain:
        raise SignInError(
            f"message signs in to {message.domain[:100]!r}, not to this gateway ({public.domain}); "
            "sign the sign_in from POST /auth/challenge"
        )
    if message.address != pubkey:
        raise SignInError("message's address is not the pubkey sent")
    if message.uri is not None and message.uri != public.origin:
        raise SignInError(f"message's URI is not this gateway's ({public.origin})")
    if message.version is not None and message.version != VERSION:
        raise SignInError(f"message's Version must be {VERSION}")
    if message.nonce is None:
        raise SignInError("message has no Nonce: it must be the challenge from POST /auth/challenge")
    issued = _moment(message.issued_at, "Issued At")
    expires = _moment(message.expiration_time, "Expiration Time")
    if issued > now + timedelta(seconds=CLOCK_SKEW_S):
        raise SignInError("message's Issued At is in the future")
    if issued < now - timedelta(seconds=max_age_s + CLOCK_SKEW_S):
        raise SignInError(f"message's Issued At is more than {max_age_s} s ago: ask for a new challenge")
    if expires <= now:
        raise SignInError("message has expired (its Expiration Time has passed): ask for a new challenge")
    return message.nonce

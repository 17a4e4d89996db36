"""The four wallet-signature headers: parsing into a typed value, and Ed25519 verification. Pure.

Parsing never raises: every malformed input becomes a :class:`HeaderFailure` whose ``reason`` is
shown to the client (401 ``AUTH_FAILED``), so a fuzzer or a buggy client can never cause a 500.
Lengths are checked before base58 decoding, whose cost grows with the square of the input.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass

import base58
from solders.pubkey import Pubkey
from solders.signature import Signature

PUBKEY = "x-pubkey"
SIGNATURE = "x-signature"
TIMESTAMP = "x-timestamp"
NONCE = "x-nonce"
WALLET_HEADERS = (PUBKEY, SIGNATURE, TIMESTAMP, NONCE)
_DISPLAY = {PUBKEY: "X-Pubkey", SIGNATURE: "X-Signature", TIMESTAMP: "X-Timestamp", NONCE: "X-Nonce"}

TIMESTAMP_WINDOW_S = 60
NONCE_MAX_LEN = 128
_NONCE = re.compile(r"[A-Za-z0-9\-_:.,]{1,128}")
_DIGITS = re.compile(r"[0-9]{1,15}")
_MAX_B58_PUBKEY = 44  # base58 of 32 bytes is at most 44 characters
_MAX_B58_SIGNATURE = 88  # and of 64 bytes at most 88
_FAST_DECODERS: dict[int, Callable[[str], Pubkey | Signature]] = {32: Pubkey.from_string, 64: Signature.from_string}


@dataclass(frozen=True, slots=True)
class WalletHeaders:
    """Well-formed wallet headers whose timestamp is inside the window (the signature is not yet checked)."""

    pubkey: str  # canonical base58 of pubkey_bytes
    pubkey_bytes: bytes
    signature: bytes
    timestamp: int
    nonce: str


@dataclass(frozen=True, slots=True)
class HeaderFailure:
    """Why the headers were refused; the reason is safe to show to the client."""

    reason: str


def has_wallet_headers(headers: Mapping[str, str]) -> bool:
    """Whether any of the four headers is present: one alone already counts as (bad) credentials."""
    return not headers.keys().isdisjoint(WALLET_HEADERS)


def decode_base58(value: str, size: int, what: str) -> bytes | HeaderFailure:
    """Decode ``value`` and insist on exactly ``size`` bytes (32: a public key, 64: a signature).

    solders' Rust decoder takes the well-formed case (far cheaper than the ``base58`` package, and
    it runs twice per signed request); only a failure goes on to ``base58`` to name the reason.
    """
    limit = _MAX_B58_PUBKEY if size <= 32 else _MAX_B58_SIGNATURE
    if not value:
        return HeaderFailure(f"{what} is empty")
    if len(value) > limit:
        return HeaderFailure(f"{what} is too long to be base58 of {size} bytes")
    fast = _FAST_DECODERS.get(size)
    if fast is not None:
        try:
            return bytes(fast(value))
        except ValueError:
            pass  # malformed: the slow path below says how
    try:
        raw = base58.b58decode(value.encode("ascii"))
    except (ValueError, UnicodeEncodeError):
        return HeaderFailure(f"{what} is not valid base58")
    if len(raw) != size:
        return HeaderFailure(f"{what} must decode to {size} bytes, got {len(raw)}")
    return raw


def parse_wallet_headers(headers: Mapping[str, str], now: float) -> WalletHeaders | HeaderFailure:
    """Parse the four headers from a lower-cased mapping, checking the timestamp against ``now``."""
    missing = [_DISPLAY[name] for name in WALLET_HEADERS if name not in headers]
    if missing:
        return HeaderFailure(
            f"wallet signature needs all of X-Pubkey, X-Signature, X-Timestamp, X-Nonce; missing {', '.join(missing)}"
        )
    pubkey = decode_base58(headers[PUBKEY], 32, "X-Pubkey")
    if isinstance(pubkey, HeaderFailure):
        return pubkey
    signature = decode_base58(headers[SIGNATURE], 64, "X-Signature")
    if isinstance(signature, HeaderFailure):
        return signature
    raw_ts = headers[TIMESTAMP]
    if not _DIGITS.fullmatch(raw_ts):
        return HeaderFailure("X-Timestamp must be Unix seconds (an unsigned integer)")
    timestamp = int(raw_ts)
    if abs(now - timestamp) > TIMESTAMP_WINDOW_S:
        return HeaderFailure(f"X-Timestamp is more than {TIMESTAMP_WINDOW_S} s away from server time")
    nonce = headers[NONCE]
    if not _NONCE.fullmatch(nonce):
        return HeaderFailure(f"X-Nonce must be 1 to {NONCE_MAX_LEN} characters of letters, digits and -_:.,")
    return WalletHeaders(str(Pubkey.from_bytes(pubkey)), pubkey, signature, timestamp, nonce)


def verify_signature(pubkey: bytes, message: bytes, signature: bytes) -> bool:
    """Ed25519 verification; any malformed key or signature is simply ``False``.

    solders' strict verification (ed25519-dalek) costs about half of PyNaCl's here and refuses the
    same edge cases (small-order keys, non-canonical S): docs/performance.md, the signed call.
    """
    if len(pubkey) != 32 or len(signature) != 64:
        return False  # checked first: solders' from_bytes panics on a wrong length
    return Signature.from_bytes(signature).verify(Pubkey.from_bytes(pubkey), message)

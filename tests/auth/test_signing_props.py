"""Property tests of the pure parts: the signing message and the wallet-header parser."""

from __future__ import annotations

import hashlib
import string

import base58
from hypothesis import given, settings
from hypothesis import strategies as st
from nacl.signing import SigningKey

from gateway.core.signing import body_hash, signing_message
from gateway.core.wallet_headers import HeaderFailure, WalletHeaders, parse_wallet_headers, verify_signature
from gateway_client import WalletSigner

methods = st.sampled_from(["GET", "POST", "PUT", "DELETE", "PATCH", "get", "post"])
paths = st.text(alphabet=string.ascii_letters + string.digits + "/-_.~%:", min_size=1, max_size=60).map(
    lambda p: "/" + p.lstrip("/")
)
queries = st.text(alphabet=string.ascii_letters + string.digits + "=&-_?/", max_size=40)
nonces = st.text(alphabet=string.ascii_letters + string.digits + "-_:.,", min_size=1, max_size=128)
timestamps = st.integers(min_value=0, max_value=10**12)
bodies = st.binary(max_size=256)


@given(methods, paths, timestamps, nonces, bodies)
def test_message_format(method: str, path: str, ts: int, nonce: str, body: bytes) -> None:
    digest = "" if method.upper() == "GET" else hashlib.sha256(body).hexdigest()
    expected = f"ledger-svc:v2:{method.upper()}:{path}:{ts}:{nonce}:{digest}"
    assert signing_message(method, path, ts, nonce, body) == expected
    assert body_hash(method, body) == digest
    assert digest == digest.lower()


@given(methods, paths, timestamps, nonces, bodies)
def test_message_is_deterministic(method: str, path: str, ts: int, nonce: str, body: bytes) -> None:
    assert signing_message(method, path, ts, nonce, body) == signing_message(method, path, str(ts), nonce, bytes(body))


@given(methods, paths, queries, timestamps, nonces, bodies)
def test_query_is_not_signed(method: str, path: str, query: str, ts: int, nonce: str, body: bytes) -> None:
    assert signing_message(method, f"{path}?{query}", ts, nonce, body) == signing_message(method, path, ts, nonce, body)


@given(paths, timestamps, nonces, bodies)
def test_get_ignores_the_body(path: str, ts: int, nonce: str, body: bytes) -> None:
    assert signing_message("GET", path, ts, nonce, body).endswith(":")
    assert signing_message("GET", path, ts, nonce, body) == signing_message("GET", path, ts, nonce, b"")


header_names = st.sampled_from(["x-pubkey", "x-signature", "x-timestamp", "x-nonce", "x-other"])


@settings(max_examples=300)
@given(st.dictionaries(header_names, st.text(max_size=200)), st.floats(allow_nan=True, allow_infinity=True))
def test_parser_never_raises(headers: dict[str, str], now: float) -> None:
    result = parse_wallet_headers(headers, now)
    assert isinstance(result, WalletHeaders | HeaderFailure)
    if isinstance(result, HeaderFailure):
        assert result.reason


@settings(max_examples=100)
@given(
    st.binary(min_size=32, max_size=32),
    st.binary(min_size=64, max_size=64),
    st.integers(min_value=0, max_value=10**10),
    nonces,
    st.integers(min_value=-60, max_value=60),
)
def test_parser_accepts_well_formed_headers(pk: bytes, sig: bytes, ts: int, nonce: str, skew: int) -> None:
    headers = {
        "x-pubkey": base58.b58encode(pk).decode(),
        "x-signature": base58.b58encode(sig).decode(),
        "x-timestamp": str(ts),
        "x-nonce": nonce,
    }
    result = parse_wallet_headers(headers, ts + skew)
    assert isinstance(result, WalletHeaders)
    assert (result.pubkey_bytes, result.signature, result.timestamp, result.nonce) == (pk, sig, ts, nonce)
    assert result.pubkey == headers["x-pubkey"]


@given(st.integers(min_value=61, max_value=10**6), st.booleans())
def test_parser_refuses_timestamps_outside_the_window(skew: int, future: bool) -> None:
    headers = WalletSigner(bytes(32)).headers("GET", "/", timestamp=1_000_000_000)
    lowered = {k.lower(): v for k, v in headers.items()}
    result = parse_wallet_headers(lowered, 1_000_000_000 + (-skew if future else skew))
    assert isinstance(result, HeaderFailure)


@settings(max_examples=50)
@given(methods, paths, bodies, nonces)
def test_client_headers_verify(method: str, path: str, body: bytes, nonce: str) -> None:
    seed = hashlib.sha256(nonce.encode()).digest()
    headers = {k.lower(): v for k, v in WalletSigner(seed).headers(method, path, body, nonce=nonce).items()}
    parsed = parse_wallet_headers(headers, int(headers["x-timestamp"]))
    assert isinstance(parsed, WalletHeaders)
    message = signing_message(method, path, headers["x-timestamp"], nonce, body).encode()
    assert verify_signature(parsed.pubkey_bytes, message, parsed.signature)
    assert bytes(SigningKey(seed).verify_key) == parsed.pubkey_bytes
    assert not verify_signature(parsed.pubkey_bytes, message + b"x", parsed.signature)


_GROUP_ORDER = 2**252 + 27742317777372353535851937790883648493


@settings(max_examples=50)
@given(st.binary(min_size=32, max_size=32), st.binary(max_size=256), st.integers(min_value=0, max_value=63))
def test_verification_agrees_with_libsodium(seed: bytes, message: bytes, flipped: int) -> None:
    """The verifier (solders) accepts what PyNaCl (libsodium) accepts, and refuses a flipped bit."""
    key = SigningKey(seed)
    signature = key.sign(message).signature
    assert verify_signature(bytes(key.verify_key), message, signature)
    tampered = bytearray(signature)
    tampered[flipped] ^= 1 << (flipped % 8)
    assert not verify_signature(bytes(key.verify_key), message, bytes(tampered))


def test_verification_refuses_what_strict_ed25519_refuses() -> None:
    key = SigningKey(bytes(range(32)))
    public, message = bytes(key.verify_key), b"ledger-svc:v2:POST:/rpc:1:n:"
    signature = key.sign(message).signature
    s = int.from_bytes(signature[32:], "little") + _GROUP_ORDER  # the same S, not reduced
    assert not verify_signature(public, message, signature[:32] + s.to_bytes(32, "little"))
    identity = bytes([1]) + bytes(31)  # a small-order key: every message would verify under it
    assert not verify_signature(identity, message, identity + bytes(32))
    assert not verify_signature(public[:31], message, signature)
    assert not verify_signature(public, message, signature[:63])

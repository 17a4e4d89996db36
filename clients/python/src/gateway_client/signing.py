"""The per-request signing message of docs/api.md. Pure (hashlib only): the server checks signatures with it
(``gateway.core.signing`` re-exports it), so the client owns it and the server depends on the client.

Both sides building the message with one function is what keeps them from drifting apart, e.g. on
whether the query string is signed (it is not) or what a GET's body hash is (the empty string).
"""

from __future__ import annotations

import hashlib

TAG = "ledger-svc:v2"


def body_hash(method: str, body: bytes) -> str:
    """Lowercase SHA-256 hex of the raw body bytes; the empty string for GET, whatever its body."""
    if method.upper() == "GET":
        return ""
    return hashlib.sha256(body).hexdigest()


def signing_message(method: str, path: str, timestamp: int | str, nonce: str, body: bytes) -> str:
    """``ledger-svc:v2:{METHOD}:{PATH}:{TIMESTAMP}:{NONCE}:{BODY_HASH}``.

    ``path`` may be given with a query string (a client passing the URL it requests); only the part
    before ``?`` is signed, because proxies and clients reorder or re-encode query strings freely.
    The method is upper-cased, so a client writing ``"post"`` signs what the server sees (``POST``).
    """
    verb = method.upper()
    bare_path = path.split("?", 1)[0]
    return f"{TAG}:{verb}:{bare_path}:{timestamp}:{nonce}:{body_hash(verb, body)}"

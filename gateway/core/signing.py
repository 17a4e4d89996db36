"""The per-request signing message of docs/api.md: the client library's (``gateway_client.signing``).

The client owns it and the server checks signatures with it, so that what a client signs is by construction
what the server checks (e.g. the query string is not signed, a GET's body hash is the empty string). The
server depends on the client package, never the reverse (the import contracts of ``make check``).
"""

from __future__ import annotations

from gateway_client.signing import TAG, body_hash, signing_message

__all__ = ["TAG", "body_hash", "signing_message"]

"""Sign gateway requests with a wallet key, the way the API defines it.

The server imports :mod:`gateway_client.signing` to check signatures, so what this signs is by construction
what the server checks. Depends on PyNaCl and base58, nothing of the server side.
"""

from __future__ import annotations

import json
import secrets
import time
from pathlib import Path

import base58
from nacl.signing import SigningKey

from gateway_client.signing import signing_message

__all__ = ["WalletSigner"]


class WalletSigner:
    """Signs requests and session challenges with one Ed25519 wallet key.

    Args:
        secret: a 32-byte seed, or a 64-byte expanded secret key (seed followed by the public key,
            the layout of Solana keypair files); the public-key half must match the seed.

    Raises:
        ValueError: if ``secret`` has another length, or its public-key half does not match the seed.

    Example:
        >>> import json, aiohttp
        >>> signer = WalletSigner(bytes(json.load(open("id.json"))))  # doctest: +SKIP
        >>> body = b'{"jsonrpc":"2.0","id":1,"method":"getSlot"}'
        >>> headers = signer.headers("POST", "/", body)  # doctest: +SKIP
        >>> async with aiohttp.ClientSession() as http:  # doctest: +SKIP
        ...     await http.post("http://127.0.0.1:8000/", data=body, headers=headers)
    """

    def __init__(self, secret: bytes) -> None:
        if len(secret) == 32:
            self._key = SigningKey(secret)
        elif len(secret) == 64:
            self._key = SigningKey(secret[:32])
            if bytes(self._key.verify_key) != secret[32:]:
                raise ValueError("the public-key half of the 64-byte secret key does not match its seed")
        else:
            raise ValueError(f"secret must be a 32-byte seed or a 64-byte expanded key, got {len(secret)} bytes")
        self._pubkey = base58.b58encode(bytes(self._key.verify_key)).decode("ascii")

    @classmethod
    def from_file(cls, path: str | Path) -> WalletSigner:
        """From a Solana keypair file (a JSON array of 64 bytes, as ``solana-keygen`` writes it)."""
        return cls(bytes(json.loads(Path(path).read_text())))

    @property
    def pubkey(self) -> str:
        """The base58 public key: the account's identity."""
        return self._pubkey

    def sign(self, message: bytes) -> str:
        """The base58 Ed25519 signature of ``message``."""
        return base58.b58encode(self._key.sign(message).signature).decode("ascii")

    def headers(
        self,
        method: str,
        path: str,
        body: bytes | str = b"",
        *,
        timestamp: int | None = None,
        nonce: str | None = None,
    ) -> dict[str, str]:
        """The four wallet-signature headers for one request.

        Args:
            method: the HTTP method, e.g. ``"POST"``.
            path: the URL path; a query string, if included, is not signed (as the server expects).
            body: the exact body bytes that will be sent (a str is sent as UTF-8); ignored for GET.
            timestamp: Unix seconds; default now. The server accepts 60 s either side.
            nonce: 1-128 characters of letters, digits and ``-_:.,``; default a fresh random one.
                Each (public key, nonce) pair is accepted once.

        Returns:
            ``X-Pubkey``, ``X-Signature``, ``X-Timestamp`` and ``X-Nonce``.

        Example:
            >>> signer = WalletSigner(bytes(32))
            >>> sorted(signer.headers("GET", "/account/info"))
            ['X-Nonce', 'X-Pubkey', 'X-Signature', 'X-Timestamp']
        """
        raw = body.encode("utf-8") if isinstance(body, str) else body
        ts = int(time.time()) if timestamp is None else timestamp
        nonce = secrets.token_urlsafe(16) if nonce is None else nonce
        message = signing_message(method, path, ts, nonce, raw)
        return {
            "X-Pubkey": self._pubkey,
            "X-Signature": self.sign(message.encode("utf-8")),
            "X-Timestamp": str(ts),
            "X-Nonce": nonce,
        }

    def sign_challenge(self, challenge: str) -> str:
        """The base58 signature of a session challenge's UTF-8 text (not hex-decoded), for ``POST /auth/verify``.

        Example:
            >>> signer = WalletSigner(bytes(32))
            >>> len(signer.sign_challenge("ab" * 32)) > 80
            True
        """
        return self.sign(challenge.encode("utf-8"))

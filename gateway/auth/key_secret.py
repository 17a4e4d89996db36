"""The secret that keys API-key hashes: 32 random bytes in ``<home>/keys/api-key-secret`` (mode 0600).

Keyed (HMAC) rather than plain hashes, so a leaked ``api_keys`` table cannot be checked against
guessed keys offline without the secret as well. Every replica must use the same secret: replicas
sharing a data dir read the same file; on several machines, give each the same secret (see the
``api_key_secret`` setting).
"""

from __future__ import annotations

import contextlib
import os
import secrets
from pathlib import Path

SECRET_FILE = "keys/api-key-secret"
SECRET_BYTES = 32


def load_or_create_secret(path: Path) -> bytes:
    """Read the secret, creating it atomically on first use.

    The new secret is written to a private temporary file and hard-linked into place, so replicas
    starting together never read a half-written file and all end up with the one that won the link.
    """
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".{path.name}.{os.getpid()}.{secrets.token_hex(4)}")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(secrets.token_bytes(SECRET_BYTES))
            with contextlib.suppress(FileExistsError):
                os.link(tmp, path)
        finally:
            tmp.unlink(missing_ok=True)
    secret = path.read_bytes()
    if len(secret) != SECRET_BYTES:
        raise ValueError(f"{path} must hold exactly {SECRET_BYTES} bytes, found {len(secret)}")
    return secret

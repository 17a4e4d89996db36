"""Where the dev wallet and its API key are: one rule for ``gateway fund``, the examples and the notebook.

- the wallet: ``$GATEWAY_WALLET`` if set, else ``<home>/wallets/dev-wallet.json``, the data dir
  ``<home>`` being ``$GATEWAY_HOME`` (default ``.gateway``, relative to the working directory);
- its API key: ``$GATEWAY_API_KEY`` if set, else the key ``gateway fund`` saved beside the wallet
  (``dev-wallet.api-key``, the wallet's name with the suffix ``.api-key``).

Only the environment and the file system: nothing of the server.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from pathlib import Path

HOME_ENV = "GATEWAY_HOME"
WALLET_ENV = "GATEWAY_WALLET"
API_KEY_ENV = "GATEWAY_API_KEY"
DEFAULT_HOME = ".gateway"
WALLET_IN_HOME = Path("wallets") / "dev-wallet.json"


def gateway_home(default: str | Path = DEFAULT_HOME) -> Path:
    """``$GATEWAY_HOME``, else ``default`` (``.gateway``)."""
    return Path(os.environ.get(HOME_ENV) or default).expanduser()


def dev_wallet_path(home: str | Path | None = None) -> Path:
    """``$GATEWAY_WALLET``, else ``<home>/wallets/dev-wallet.json``; ``home`` defaults to :func:`gateway_home`."""
    explicit = os.environ.get(WALLET_ENV)
    if explicit:
        return Path(explicit).expanduser()
    return (gateway_home() if home is None else Path(home).expanduser()) / WALLET_IN_HOME


def api_key_path(wallet: str | Path) -> Path:
    """Where ``gateway fund`` saves the API key of ``wallet``: beside it, suffix ``.api-key``."""
    return Path(wallet).with_suffix(".api-key")


def saved_api_key(wallet: str | Path | None = None) -> str | None:
    """The key saved beside ``wallet`` (default :func:`dev_wallet_path`), or None."""
    path = api_key_path(dev_wallet_path() if wallet is None else wallet)
    try:
        key = path.read_text().strip()
    except FileNotFoundError:
        return None
    return key or None


def save_api_key(key: str, wallet: str | Path | None = None) -> Path:
    """Save ``key`` beside ``wallet`` (default :func:`dev_wallet_path`); where it went.

    The file is private from the moment it exists: a temporary file created 0600 beside it, renamed
    over it (never a chmod after writing, which leaves the key readable by others meanwhile; and a
    reader that had an old, readable key file open cannot read the new key through it). The server's
    own secrets are written the same way (``gateway.base.keys.write_private``; the client imports nothing of
    the server)."""
    path = api_key_path(dev_wallet_path() if wallet is None else wallet)
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".api-key-")
    try:
        with os.fdopen(fd, "w") as f:
            f.write(key + "\n")
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise
    return path


def dev_api_key(wallet: str | Path | None = None) -> str | None:
    """``$GATEWAY_API_KEY``, else :func:`saved_api_key`; None when there is neither."""
    return os.environ.get(API_KEY_ENV) or saved_api_key(wallet)


def require_dev_api_key(wallet: str | Path | None = None) -> str:
    """:func:`dev_api_key`, or a :class:`LookupError` that says how to get one."""
    key = dev_api_key(wallet)
    if key is None:
        where = api_key_path(dev_wallet_path() if wallet is None else wallet)
        hint = f"run `gateway fund` (on the embedded devnode), which saves one in {where}"
        raise LookupError(f"no API key: set {API_KEY_ENV}, or {hint}")
    return key

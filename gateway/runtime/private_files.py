"""Secrets are private files: checked, and made private, at every start of ``gateway up``.

The keys directory (service keypairs, the API-key HMAC secret), the embedded Redis's directory and its
append-only and snapshot files, the embedded PostgreSQL's data directory, and Ray's token (which lets
its holder run code on the cluster): directories 0700, files 0600, owned by the user running the
gateway. One readable by others is made private and the fix is reported (``gateway up`` prints it):
a file copied in with ``cp``, or created by Ray (``~/.ray/auth_token`` is written 0644), is still the
operator's. The Ray token is created private before ``ray.init`` would create it readable by all.
"""

from __future__ import annotations

import contextlib
import os
import stat
from pathlib import Path

#: Under the data dir, what holds secrets: the keypairs and the HMAC secret (gateway/base/keys.py), Redis's,
#: PostgreSQL's.
PRIVATE_DIRS = ("keys", "redis", "postgres")
DIR_MODE, FILE_MODE = 0o700, 0o600
#: Ray's environment variables naming its token (value, file); else the file is ~/.ray/auth_token.
RAY_TOKEN_ENV, RAY_TOKEN_PATH_ENV = "RAY_AUTH_TOKEN", "RAY_AUTH_TOKEN_PATH"


def make_private(path: Path) -> str | None:
    """Take group and others' access away from ``path`` (a directory or a regular file); what was
    fixed, or None when it was private already (or is not there, or is a socket)."""
    try:
        st = path.lstat()
    except FileNotFoundError:
        return None
    if not (stat.S_ISDIR(st.st_mode) or stat.S_ISREG(st.st_mode)) or not st.st_mode & 0o077:
        return None
    mode = DIR_MODE if stat.S_ISDIR(st.st_mode) else FILE_MODE
    path.chmod(mode)
    was, now = stat.filemode(st.st_mode), stat.filemode(mode | stat.S_IFMT(st.st_mode))
    return f"{path} was {was} (open to others): made {now}"


def secure_home(home: Path) -> list[str]:
    """Make each private directory of ``home`` and everything in it private; what was fixed."""
    fixed = []
    for name in PRIVATE_DIRS:
        top = home / name
        for path in [top, *(top.rglob("*") if top.is_dir() else ())]:
            note = make_private(path)
            if note is not None:
                fixed.append(note)
    return fixed


def ray_token_path() -> Path | None:
    """The file Ray reads its token from, or None when the token is given as a value (``RAY_AUTH_TOKEN``)."""
    if os.environ.get(RAY_TOKEN_ENV):
        return None
    named = os.environ.get(RAY_TOKEN_PATH_ENV)
    return Path(named).expanduser() if named else Path.home() / ".ray" / "auth_token"


def secure_ray_token(create: bool) -> list[str]:
    """Make Ray's token file (and its directory, when it is ``~/.ray``) private, creating the token first
    (``create``: a local Ray, which would create it itself, readable by all) when there is none."""
    path = ray_token_path()
    if path is None or os.environ.get("RAY_AUTH_MODE", "").lower() == "disabled":
        return []
    if create and not path.exists():
        from ray._private.authentication.authentication_token_generator import generate_new_authentication_token

        path.parent.mkdir(mode=DIR_MODE, parents=True, exist_ok=True)
        with contextlib.suppress(FileExistsError):  # another start made it first: that one is used
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, FILE_MODE)
            with os.fdopen(fd, "w") as f:
                f.write(generate_new_authentication_token())
    places = [path] + ([path.parent] if path.parent == Path.home() / ".ray" else [])
    return [note for note in map(make_private, places) if note is not None]

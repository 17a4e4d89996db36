"""The identity the auth stage attaches to a call: a public key and how it was proved."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

AuthMode = Literal["api_key", "wallet", "session"]


@dataclass(frozen=True, slots=True)
class Identity:
    """Who is calling. Credits, limits and history are keyed by ``pubkey`` whatever the ``mode``.

    ``owner_session``: a session made from a Sign-In With Solana message that names this gateway's
    domain (docs/api.md, Sessions), so the wallet's owner saw where they signed in. Such a session,
    like a per-request wallet signature, is the owner's: access rules never bind it, and it may manage
    the account's sessions. A session made from the plain hex challenge is an ordinary one.
    """

    pubkey: str
    mode: AuthMode
    owner_session: bool = False

    @property
    def owner(self) -> bool:
        """The wallet's own proof: a per-request signature or an owner session."""
        return self.mode == "wallet" or self.owner_session

"""The identity the auth stage attaches to a call: a public key and how it was proved."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

AuthMode = Literal["api_key", "wallet", "session"]


@dataclass(frozen=True, slots=True)
class Identity:
    """Who is calling. Credits, limits and history are keyed by ``pubkey`` whatever the ``mode``."""

    pubkey: str
    mode: AuthMode

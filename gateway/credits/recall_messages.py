"""The ``RECALL`` channel's messages (:mod:`gateway.credits.recall`), typed.

On the wire, unchanged so that processes of either version understand each other::

    want <sender> <pubkey>              give back your leases of the account
    back <sender> <pubkey> <credits>    gave back this many credits of it

``sender`` is a replica's id (a replica ignores its own messages), or who else asks:
``operator`` (the CLI's new limits), ``spend-cap`` (a new daily cap). :func:`parse` answers None for
anything else, with a log line: a garbled message never stops the channel's follower.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

log = logging.getLogger(__name__)

#: Who asks, when it is no replica.
OPERATOR = "operator"
SPEND_CAP = "spend-cap"


@dataclass(frozen=True, slots=True)
class Want:
    """Every process holding leases of ``pubkey`` should give them back."""

    sender: str
    pubkey: str


@dataclass(frozen=True, slots=True)
class Back:
    """``sender`` gave back ``credits`` of ``pubkey``'s leased credits."""

    sender: str
    pubkey: str
    credits: int


Message = Want | Back


def encode(message: Message) -> str:
    """The message's text on the channel."""
    if isinstance(message, Want):
        return f"want {message.sender} {message.pubkey}"
    return f"back {message.sender} {message.pubkey} {message.credits}"


def parse(text: str) -> Message | None:
    """The message ``text`` carries; None, logged, when it is no message of this channel."""
    parts = text.split()
    if len(parts) == 3 and parts[0] == "want":
        return Want(parts[1], parts[2])
    if len(parts) == 4 and parts[0] == "back" and parts[3].isascii() and parts[3].isdigit():
        return Back(parts[1], parts[2], int(parts[3]))
    log.info("ignored a recall message that is none: %.100r", text)
    return None

"""The pool of nodes the gateway stands in front of: what one node is (:class:`UpstreamNode`), the roles
a node serves and which role a method class needs. Pure data and checks.

A node is named by its ``name`` everywhere a reader may look (logs, metric labels, ``gateway status``,
the ``X-Upstream`` header): its URLs, headers and x-token may hold a provider's key, so they are left out
of its ``repr`` and of every message about it.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from enum import StrEnum
from typing import Self
from urllib.parse import urlsplit

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from gateway.core.methods import MethodClass


class Role(StrEnum):
    """What a node is asked for: plain reads, the heavy indexed reads (an indexer), sends, PubSub, geyser."""

    READS = "reads"
    HEAVY = "heavy"
    SENDS = "sends"
    PUBSUB = "pubsub"
    GEYSER = "geyser"


class Tier(StrEnum):
    """Primary nodes serve while one is in service for a role; fallback nodes only when none is."""

    PRIMARY = "primary"
    FALLBACK = "fallback"


#: The roles of the node's JSON-RPC over HTTP, which every node has.
RPC_ROLES = (Role.READS, Role.HEAVY, Role.SENDS)
#: The most nodes one pool holds: node names are metric labels, and every process keeps connections to each.
MAX_NODES = 32
NAME = re.compile(r"[a-z0-9][a-z0-9._-]{0,31}")
#: Header names a node entry may not set: the node client writes them itself.
RESERVED_HEADERS = frozenset({"host", "content-length", "content-type", "connection", "transfer-encoding"})
_TOKEN = re.compile(r"[!#$%&'*+.^_`|~0-9A-Za-z-]+")

_HEAVY_CLASSES = frozenset({MethodClass.READ_HEAVY, MethodClass.ARCHIVE_HISTORY})
_SEND_CLASSES = frozenset({MethodClass.SEND})


def role_of(method_class: MethodClass | None) -> Role:
    """The role a forwarded call of ``method_class`` needs: heavy indexed reads, sends, or reads."""
    if method_class in _HEAVY_CLASSES:
        return Role.HEAVY
    if method_class in _SEND_CLASSES:
        return Role.SENDS
    return Role.READS


def _url(value: str | None, schemes: tuple[str, ...], field: str) -> str | None:
    """``value`` when it is a URL of one of ``schemes`` with a host. The message never repeats the URL."""
    if value is None or value == "":
        return None
    parts = urlsplit(value)
    if parts.scheme not in schemes or not parts.hostname:
        raise ValueError(f"{field} must be a URL starting with {' or '.join(s + '://' for s in schemes)} and a host")
    return value


class UpstreamNode(BaseModel):
    """One node of the pool (``upstreams``, docs/configuration.md). Only ``name``, ``tier`` and ``roles``
    appear in its ``repr``."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str = Field(description="How the node is named everywhere: logs, metrics, gateway status, X-Upstream.")
    rpc_url: str = Field(repr=False, description="Its JSON-RPC URL (http:// or https://).")
    ws_url: str | None = Field(None, repr=False, description="Its PubSub URL (ws:// or wss://).")
    grpc_url: str | None = Field(None, repr=False, description="Its Yellowstone geyser endpoint (http:// or https://).")
    grpc_token: str | None = Field(None, repr=False, description="The x-token its geyser endpoint wants.")
    headers: dict[str, str] = Field(
        default_factory=dict, repr=False, description="Headers sent with every JSON-RPC request (a provider's key)."
    )
    tier: Tier = Field(Tier.PRIMARY, description="primary, or fallback: used only while no primary serves a role.")
    roles: tuple[Role, ...] = Field(
        (),
        description="What it is asked for; empty: every role its URLs allow (reads, heavy, sends; pubsub with "
        "ws_url; geyser with grpc_url).",
    )

    @field_validator("name")
    @classmethod
    def _check_name(cls, value: str) -> str:
        if not NAME.fullmatch(value):
            raise ValueError("a node's name is 1 to 32 of a-z, 0-9, '.', '_' and '-', starting with a letter or digit")
        return value

    @field_validator("rpc_url")
    @classmethod
    def _check_rpc_url(cls, value: str) -> str:
        checked = _url(value, ("http", "https"), "rpc_url")
        if checked is None:
            raise ValueError("rpc_url is required")
        return checked

    @field_validator("ws_url")
    @classmethod
    def _check_ws_url(cls, value: str | None) -> str | None:
        return _url(value, ("ws", "wss"), "ws_url")

    @field_validator("grpc_url")
    @classmethod
    def _check_grpc_url(cls, value: str | None) -> str | None:
        return _url(value, ("http", "https"), "grpc_url")

    @field_validator("headers")
    @classmethod
    def _check_headers(cls, value: dict[str, str]) -> dict[str, str]:
        for name, text in value.items():
            if not _TOKEN.fullmatch(name) or name.lower() in RESERVED_HEADERS:
                raise ValueError(f"headers: {name!r} is not a header name a node entry may set")
            if any(c in text for c in "\r\n\0"):
                raise ValueError(f"headers: the value of {name!r} holds a line break or NUL")
        return value

    @model_validator(mode="after")
    def _default_roles(self) -> Self:
        allowed = {*RPC_ROLES, *((Role.PUBSUB,) if self.ws_url else ()), *((Role.GEYSER,) if self.grpc_url else ())}
        if not self.roles:
            object.__setattr__(self, "roles", tuple(r for r in Role if r in allowed))
            return self
        if len(set(self.roles)) != len(self.roles):
            raise ValueError(f"node {self.name}: a role is listed twice")
        missing = [r.value for r in self.roles if r not in allowed]
        if missing:
            raise ValueError(f"node {self.name}: {', '.join(missing)} needs its URL (pubsub: ws_url, geyser: grpc_url)")
        return self

    def serves(self, role: Role) -> bool:
        return role in self.roles


def check_pool(nodes: Sequence[UpstreamNode]) -> list[str]:
    """What is wrong with ``nodes`` as a whole (each node checked itself already): empty when nothing."""
    problems = []
    names = [n.name for n in nodes]
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:
        problems.append(f"node names must be unique: {', '.join(twice)} more than once")
    if len(nodes) > MAX_NODES:
        problems.append(f"at most {MAX_NODES} nodes, {len(nodes)} given")
    if not any(n.serves(Role.READS) for n in nodes):
        problems.append("no node serves reads")
    return problems


def serving(nodes: Iterable[UpstreamNode], role: Role) -> list[UpstreamNode]:
    """The nodes of ``role``, primaries first, each tier in the order configured."""
    of_role = [n for n in nodes if n.serves(role)]
    return [n for n in of_role if n.tier is Tier.PRIMARY] + [n for n in of_role if n.tier is Tier.FALLBACK]

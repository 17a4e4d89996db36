"""The pool of nodes the gateway stands in front of: what one node is (:class:`UpstreamNode`), the roles
a node serves and which role a method class needs. Pure data and checks.

A node is named by its ``name`` everywhere a reader may look (logs, metric labels, ``gateway status``,
the ``X-Upstream`` header): its URLs, headers and x-token may hold a provider's key, so they are left out
of its ``repr`` and of every message about it.

Each of those secrets may be given by reference, ``{"env": NAME}`` or ``{"file": PATH}`` in place of the
value (:class:`SecretRef`): every process that builds the node reads it from its own environment or file,
and the node is written out (``model_dump``: the settings handed to Ray, ``upstream_changes``) with the
reference, never the value. The attributes (``rpc_url``, ``headers``, ...) are the values read.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import Any, Self
from urllib.parse import urlsplit

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ModelWrapValidatorHandler,
    PrivateAttr,
    SerializerFunctionWrapHandler,
    field_validator,
    model_serializer,
    model_validator,
)

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

#: The fields that may be given by reference (and each value of ``headers``).
SECRET_FIELDS = ("rpc_url", "ws_url", "grpc_url", "grpc_token")
_URL_FIELDS = ("rpc_url", "ws_url", "grpc_url")
_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,127}")

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


@dataclass(frozen=True, slots=True)
class SecretRef:
    """Where a node's secret is read: the environment variable ``env``, or the file ``file`` (its text, the
    surrounding white space dropped), in the process that builds the node."""

    env: str | None = None
    file: str | None = None

    @classmethod
    def parse(cls, value: Any, what: str) -> SecretRef | None:
        """The reference ``value`` is (``{"env": NAME}`` or ``{"file": PATH}``), None for a plain value;
        ValueError for anything else shaped like a reference."""
        if isinstance(value, SecretRef):
            return value
        if not isinstance(value, dict):
            return None
        env, file = value.get("env"), value.get("file")
        if set(value) - {"env", "file"} or (env is None) == (file is None):
            raise ValueError(f"{what}: a reference is {{env = NAME}} or {{file = PATH}}, one of them")
        if env is not None and not (isinstance(env, str) and _ENV_NAME.fullmatch(env)):
            raise ValueError(f"{what}: env must name an environment variable (letters, digits and _)")
        if file is not None and not (isinstance(file, str) and os.path.isabs(file)):
            raise ValueError(f"{what}: file must be an absolute path (each process reads it from its own directory)")
        return cls(env, file)

    def read(self, what: str) -> str:
        """The secret; ValueError naming the variable or file (never a value) when there is none."""
        if self.env is not None:
            text = os.environ.get(self.env)
            if text is None:
                raise ValueError(f"{what}: the environment variable {self.env} is not set")
        else:
            assert self.file is not None
            try:
                text = Path(self.file).read_text()
            except (OSError, UnicodeDecodeError) as exc:
                why = exc.strerror if isinstance(exc, OSError) and exc.strerror else type(exc).__name__
                raise ValueError(f"{what}: the file {self.file} cannot be read ({why})") from None
        text = text.strip()
        if not text:
            raise ValueError(f"{what}: {self.document()} is empty")
        return text

    def document(self) -> dict[str, str]:
        """The reference as it is written out: ``{"env": NAME}`` or ``{"file": PATH}``."""
        return {"env": self.env} if self.env is not None else {"file": self.file or ""}


def may_hold_key(url: str) -> bool:
    """Whether a node URL given as a value may hold a provider's key: a user, a path or a query (keys go
    there: ``/?api-key=``, ``/v2/KEY``); a bare ``scheme://host[:port]`` holds none."""
    parts = urlsplit(url)
    return bool(parts.username or parts.password or parts.path.strip("/") or parts.query or parts.fragment)


class UpstreamNode(BaseModel):
    """One node of the pool (``upstreams``, docs/configuration.md). Only ``name``, ``tier`` and ``roles``
    appear in its ``repr``."""

    # hide_input_in_errors: a bad entry's error never repeats a value (a URL's key)
    model_config = ConfigDict(frozen=True, extra="forbid", hide_input_in_errors=True)
    #: The secrets given by reference: a field's name, or ``headers.<name>``, and where it is read.
    _references: dict[str, SecretRef] = PrivateAttr(default_factory=dict)

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

    @model_validator(mode="wrap")
    @classmethod
    def _read_references(cls, data: Any, handler: ModelWrapValidatorHandler[Self]) -> Self:
        """Read each secret given by reference, and remember the reference (what the node is written as)."""
        references: dict[str, SecretRef] = {}
        if isinstance(data, dict):
            data = dict(data)
            name = data.get("name")
            node = f"node {name}: " if isinstance(name, str) and NAME.fullmatch(name) else ""
            for field in SECRET_FIELDS:
                reference = SecretRef.parse(data.get(field), node + field)
                if reference is not None:
                    references[field] = reference
                    data[field] = reference.read(node + field)
            headers = data.get("headers")
            if isinstance(headers, dict):
                headers = dict(headers)
                for header, value in headers.items():
                    what = f"{node}headers: the value of {header!r}"
                    reference = SecretRef.parse(value, what)
                    if reference is not None:
                        references[f"headers.{header}"] = reference
                        headers[header] = reference.read(what)
                data["headers"] = headers
        made = handler(data)
        if references:
            made._references = references
        return made

    @model_serializer(mode="wrap")
    def _write_references(self, handler: SerializerFunctionWrapHandler) -> Any:
        """The node as written out: each secret given by reference as its reference, never its value."""
        data = handler(self)
        if not isinstance(data, dict):
            return data
        for path, reference in self._references.items():
            field, _, header = path.partition(".")
            if header and isinstance(data.get("headers"), dict):
                data["headers"][header] = reference.document()
            elif not header and field in data:
                data[field] = reference.document()
        return data

    def values_given(self) -> list[str]:
        """The secrets given as values rather than by reference, each named (never its value): a URL that
        may hold a key (:func:`may_hold_key`), the x-token, each header."""
        given = [f for f in _URL_FIELDS if f not in self._references and (u := getattr(self, f)) and may_hold_key(u)]
        if self.grpc_token is not None and "grpc_token" not in self._references:
            given.append("grpc_token")
        given += [f"headers.{h}" for h in self.headers if f"headers.{h}" not in self._references]
        return given

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

"""An account's access rules (docs/api.md, "Access rules"): what they hold, how input is checked, and
whether a request passes them. Pure: no storage, no network.

The rules bind the credentials that leak, the API key and session tokens; a request signed by the
wallet itself is the owner's and is never refused by them (so a wrong CIDR cannot lock the owner
out). Each list left empty allows everything of its kind:

    origins     exact ``scheme://host[:port]``, or ``scheme://*.domain[:port]`` for any subdomain; a
                request from one of the gateway's own origins (configured: ``public_url``, ``public_origins``;
                never the request's ``Host``, which a DNS-rebinding page chooses) is never refused, nor one
                with no ``Origin`` unless its ``Sec-Fetch-Site`` says a browser sent it from another site
    addresses   IPv4/IPv6 addresses and CIDR ranges the client address must fall in
    methods     JSON-RPC method names and method classes (``READ_CHEAP`` ...); ``SUBSCRIPTION``
                for the WebSocket subscriptions, ``GRPC`` for the gRPC stream
    rate        requests per second the key and sessions make together (None: the account's alone)

One list is the other way round: ``webhooks``, the webhook management actions the key and sessions may
take, allows none while the account has any rule (a leaked key must not read the receivers, take a
signing secret or rotate one), and every action to an account with no rule at all.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from gateway.core.errors import ProxyError, RpcError
from gateway.core.identity import Identity
from gateway.core.methods import MethodClass

#: Bounds of the input (docs/api.md, "Access rules").
MAX_ORIGINS = 32
MAX_ADDRESSES = 64
MAX_METHODS = 128
MAX_ENTRY_CHARS = 253
MAX_RATE = 100_000
#: The webhook management actions, one per route of ``/webhooks`` (docs/api.md, "Webhooks").
WEBHOOK_ACTIONS = ("create", "list", "delete", "pause", "resume", "replay", "rotate-secret", "deliveries")
MAX_WEBHOOK_ACTIONS = len(WEBHOOK_ACTIONS)
#: The ``Sec-Fetch-Site`` of a request that no page started (typed in the address bar), and of one a page
#: sent to its own origin: the gateway's own page only when that origin (the request's ``Host``, then) is
#: one of the gateway's own; any other is another site's page (docs/api.md, "Access rules").
NO_PAGE = "none"
SAME_ORIGIN = "same-origin"
#: The JSON-RPC code of an access refusal: none of the interface's (-32001..-32015, -326xx, -32700).
ACCESS_DENIED_RPC = -32030
ACCESS_DENIED = "ACCESS_DENIED"
#: The WebSocket close code of an access refusal (the interface uses 4001-4003).
ACCESS_DENIED_CLOSE = 4004
#: Pseudo-classes beyond the method classes: the WebSocket subscriptions and the gRPC stream.
SUBSCRIPTION = "SUBSCRIPTION"
GRPC = "GRPC"
CLASSES = frozenset({*(c.value for c in MethodClass if c is not MethodClass.DENIED), SUBSCRIPTION, GRPC})
#: The bulk routes count as the method (and class) each of their items runs.
BULK_METHODS: Mapping[str, tuple[str, str]] = {
    "/bulk/getBalances": ("getBalance", MethodClass.READ_CHEAP.value),
    "/bulk/getTokenBalances": ("getTokenAccountsByOwner", MethodClass.READ_HEAVY.value),
    "/bulk/getTransactions": ("getTransaction", MethodClass.READ_MEDIUM.value),
}
BOUND_MODES = frozenset({"api_key", "session"})
#: The names of this machine a browser on it reaches a loopback gateway by.
LOOPBACK_NAMES = ("127.0.0.1", "localhost", "[::1]")


def bound(identity: Identity) -> bool:
    """Whether the rules bind this credential: an API key or an ordinary session; never the owner's own
    proof (a wallet signature or an owner session), so the owner is never locked out."""
    return identity.mode in BOUND_MODES and not identity.owner


_METHOD_NAME = re.compile(r"[A-Za-z][A-Za-z0-9_]{0,63}")
_HOST_LABEL = re.compile(r"(?!-)[a-z0-9-]{1,63}(?<!-)")

IpNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network


class RulesInvalid(ValueError):
    """Input that is not a valid rule; the message says which entry and why."""


@dataclass(frozen=True, slots=True)
class AccessRules:
    origins: tuple[str, ...] = ()
    addresses: tuple[str, ...] = ()
    methods: tuple[str, ...] = ()
    rate: int | None = None
    webhooks: tuple[str, ...] = ()

    @property
    def empty(self) -> bool:
        return not (self.origins or self.addresses or self.methods or self.rate or self.webhooks)

    def document(self) -> dict[str, Any]:
        return {
            "origins": list(self.origins),
            "addresses": list(self.addresses),
            "methods": list(self.methods),
            "rate": self.rate,
            "webhooks": list(self.webhooks),
        }

    def networks(self) -> tuple[IpNetwork, ...]:
        return tuple(ipaddress.ip_network(a, strict=False) for a in self.addresses)


NO_RULES = AccessRules()


def parse_rules(document: Any, known_methods: Iterable[str]) -> AccessRules:
    """The rules of a ``POST /account/access`` body, each entry checked and normalised; raises
    :class:`RulesInvalid`. Absent lists are empty; any other field is refused."""
    if not isinstance(document, dict):
        raise RulesInvalid("the body must be a JSON object with origins, addresses, methods, rate and webhooks")
    unknown = sorted(set(document) - {"origins", "addresses", "methods", "rate", "webhooks"})
    if unknown:
        raise RulesInvalid(
            f"unknown field {unknown[0]!r}; the fields are origins, addresses, methods, rate and webhooks"
        )
    origins = _list(document, "origins", MAX_ORIGINS)
    addresses = _list(document, "addresses", MAX_ADDRESSES)
    methods = _list(document, "methods", MAX_METHODS)
    webhooks = _list(document, "webhooks", MAX_WEBHOOK_ACTIONS)
    known = frozenset(known_methods)
    return AccessRules(
        tuple(dict.fromkeys(normalize_origin(o) for o in origins)),
        tuple(dict.fromkeys(normalize_address(a) for a in addresses)),
        tuple(dict.fromkeys(_method(m, known) for m in methods)),
        _rate(document.get("rate")),
        tuple(dict.fromkeys(_webhook_action(w) for w in webhooks)),
    )


def _rate(value: Any) -> int | None:
    if value is None:
        return None
    if not isinstance(value, int) or isinstance(value, bool) or not 1 <= value <= MAX_RATE:
        raise RulesInvalid(f"rate must be a whole number of requests per second, 1 to {MAX_RATE}, or null")
    return value


def _list(document: dict[str, Any], name: str, most: int) -> list[str]:
    value = document.get(name, [])
    if value is None:
        return []
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise RulesInvalid(f"{name} must be an array of strings")
    if len(value) > most:
        raise RulesInvalid(f"{name}: at most {most} entries ({len(value)} given)")
    for entry in value:
        if not entry or len(entry) > MAX_ENTRY_CHARS:
            raise RulesInvalid(f"{name}: each entry is 1 to {MAX_ENTRY_CHARS} characters")
    return value


def normalize_origin(origin: str) -> str:
    """``scheme://host[:port]`` in lower case (``*.`` allowed as the host's first label); raises
    :class:`RulesInvalid` for anything else (a path, a query, credentials, another scheme)."""
    text = origin.strip().lower().rstrip("/")
    try:
        parts = urlsplit(text)
        port = parts.port
    except ValueError as exc:
        raise RulesInvalid(f"origin {origin!r}: {exc}") from exc
    host = parts.hostname or ""
    if parts.scheme not in ("http", "https") or parts.path or parts.query or parts.fragment or "@" in parts.netloc:
        raise RulesInvalid(f"origin {origin!r}: must be http(s)://host[:port], nothing after it")
    name = host[2:] if host.startswith("*.") else host
    if not _valid_host(name):
        raise RulesInvalid(f"origin {origin!r}: not a host name or address")
    return f"{parts.scheme}://{host}" + (f":{port}" if port is not None else "")


def _valid_host(host: str) -> bool:
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    try:
        ipaddress.ip_address(host)
        return True
    except ValueError:
        pass
    labels = host.split(".")
    return 0 < len(host) <= 253 and all(_HOST_LABEL.fullmatch(label) for label in labels)


def normalize_address(entry: str) -> str:
    """An address or CIDR range as ``ipaddress`` writes it (host bits refused: ``10.0.0.1/8`` is a typo
    more often than a range)."""
    try:
        return str(ipaddress.ip_network(entry.strip(), strict=True))
    except ValueError as exc:
        raise RulesInvalid(f"address {entry!r}: not an IP address or CIDR range ({exc})") from exc


def _method(entry: str, known: frozenset[str]) -> str:
    name = entry.strip()
    if name in CLASSES or (_METHOD_NAME.fullmatch(name) and name in known):
        return name
    raise RulesInvalid(f"method {entry!r}: not a method of this gateway nor a class ({', '.join(sorted(CLASSES))})")


def _webhook_action(entry: str) -> str:
    action = entry.strip().lower()
    if action in WEBHOOK_ACTIONS:
        return action
    raise RulesInvalid(f"webhooks: {entry!r} is not a webhook action ({', '.join(WEBHOOK_ACTIONS)})")


# -- decisions ---------------------------------------------------------------------------------


def origin_allowed(
    rules: AccessRules,
    origin: str | None,
    own: frozenset[str],
    fetch_site: str | None = None,
    host: str | None = None,
) -> bool:
    """Whether a request from ``origin`` (its ``Origin`` header) passes; ``own`` are the gateway's own
    origins as :func:`exact_origin` writes them, from its configuration: never the request's ``Host``
    alone, which a page of any site whose name resolves to the gateway (DNS rebinding) sends as its own.
    Without an ``Origin`` it passes unless ``fetch_site`` (its ``Sec-Fetch-Site``) says a page sent it:
    another site's (a browser sends no ``Origin`` with an ``<img>``'s or a ``<script>``'s GET, so the key
    in their URL would otherwise spend from any site), or a page of the request's own origin whose
    ``host`` is not one of the gateway's own origins (a rebound name's same-origin GET)."""
    if not rules.origins:
        return True
    if origin is None:
        site = None if fetch_site is None else fetch_site.strip().lower()
        if site == SAME_ORIGIN:
            return host is not None and host.strip().lower() in _own_hosts(own)
        return site is None or site == NO_PAGE
    text = origin.strip().lower().rstrip("/")
    try:
        parts = urlsplit(text)
        port = parts.port
    except ValueError:
        return False
    if exact_origin(text) in own:
        return True  # the gateway's own page
    return any(_origin_matches(pattern, parts.scheme, parts.hostname or "", port) for pattern in rules.origins)


def _own_hosts(own: frozenset[str]) -> frozenset[str]:
    """The ``Host`` headers of requests to the gateway's own origins: ``host[:port]``, the default port
    written or not."""
    hosts = set()
    for origin in own:
        parts = urlsplit(origin)
        hosts.add(parts.netloc)
        if parts.port is None:
            hosts.add(f"{parts.netloc}:{443 if parts.scheme == 'https' else 80}")
    return frozenset(hosts)


def exact_origin(text: str) -> str | None:
    """An http(s) origin as compared: ``scheme://host[:port]`` in lower case, the scheme's default port
    left out (as a browser writes ``Origin``); None for anything else."""
    parts = urlsplit(text.strip().lower().rstrip("/"))
    try:
        port = parts.port
    except ValueError:
        return None
    host = parts.hostname
    if parts.scheme not in ("http", "https") or not host or parts.path or parts.query or "@" in parts.netloc:
        return None
    host = f"[{host}]" if ":" in host else host
    default = 443 if parts.scheme == "https" else 80
    return f"{parts.scheme}://{host}" + ("" if port in (None, default) else f":{port}")


def own_origins(public_url: str | None, public_origins: Iterable[str], port: int) -> frozenset[str]:
    """The gateway's own origins: ``public_url``'s and ``public_origins``; without ``public_url``, its
    loopback addresses at ``port`` (``http://127.0.0.1``, ``localhost`` and ``[::1]``, and https), where
    the embedded stack serves its account page, and ``public_origins``."""
    configured = [*([public_url] if public_url else []), *public_origins]
    if not public_url:
        configured += [f"{scheme}://{host}:{port}" for scheme in ("http", "https") for host in LOOPBACK_NAMES]
    return frozenset(o for o in map(exact_origin, configured) if o is not None)


def _origin_matches(pattern: str, scheme: str, host: str, port: int | None) -> bool:
    want = urlsplit(pattern)
    if want.scheme != scheme or want.port != port:
        return False
    want_host = want.hostname or ""
    if want_host.startswith("*."):
        return host.endswith(want_host[1:]) and len(host) > len(want_host) - 1
    return host == want_host


def address_allowed(networks: tuple[IpNetwork, ...], address: str) -> bool:
    if not networks:
        return True
    try:
        ip = ipaddress.ip_address(address.split("%", 1)[0])
    except ValueError:
        return False  # "unknown": no address to match, refused while a rule asks for one
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    return any(ip.version == n.version and ip in n for n in networks)


def method_allowed(rules: AccessRules, method: str, method_class: str | None) -> bool:
    if not rules.methods:
        return True
    return method in rules.methods or (method_class is not None and method_class in rules.methods)


def webhook_allowed(rules: AccessRules, action: str) -> bool:
    """Whether a bound credential may take a webhook ``action``: any, while the account has no rule;
    otherwise only the actions its ``webhooks`` list names (none by default)."""
    return rules.empty or action in rules.webhooks


# -- refusals ----------------------------------------------------------------------------------


def access_denied(message: str) -> ProxyError:
    """403 ACCESS_DENIED (-32030): the credential's account rules refuse this request. Free."""
    return ProxyError(403, ACCESS_DENIED, f"access denied: {message}", ACCESS_DENIED_RPC)


def method_denied(method: str) -> RpcError:
    return access_denied(f"the account's access rules do not allow {method} with this credential").rpc_error()


def rules_invalid(message: str) -> ProxyError:
    return ProxyError(400, "INVALID_REQUEST", f"invalid access rules: {message}")

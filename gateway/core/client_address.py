"""Who is calling, as far as the network tells: the address per-address limits are keyed by. Pure.

The peer address is the client, unless the peer is a trusted proxy: then the client is the right-most
``X-Forwarded-For`` entry that is not itself a trusted proxy (each proxy appends the address it saw,
so entries left of that one are the client's own claims and are never believed).
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable
from dataclasses import dataclass

IpNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network


@dataclass(frozen=True)
class TrustedProxies:
    networks: tuple[IpNetwork, ...] = ()

    @classmethod
    def parse(cls, entries: Iterable[str]) -> TrustedProxies:
        return cls(tuple(ipaddress.ip_network(e, strict=False) for e in entries))

    def trusts(self, address: str) -> bool:
        try:
            ip = ipaddress.ip_address(address)
        except ValueError:
            return False
        return any(ip in network for network in self.networks)


def client_address(peer: str | None, forwarded_for: str | None, trusted: TrustedProxies) -> str:
    """The address to account a request to; ``"unknown"`` when the transport gave none."""
    if peer is None:
        return "unknown"
    if not forwarded_for or not trusted.networks or not trusted.trusts(peer):
        return peer
    for entry in reversed(forwarded_for.split(",")):
        candidate = entry.strip()
        if candidate and not trusted.trusts(candidate):
            return candidate
    return peer


def grpc_peer_host(peer: str) -> str:
    """The host of a gRPC peer as grpc names it (``ipv4:1.2.3.4:port``, ``ipv6:[::1]:port``); anything else
    (a unix socket) whole."""
    kind, _, rest = peer.partition(":")
    if kind == "ipv6" and rest.startswith("["):
        return rest[1 : rest.find("]")]
    if kind == "ipv4":
        return rest.rpartition(":")[0]
    return peer

"""A connection's security session: its principal, where it comes from and how it authenticated.

The server makes one per connection (anonymous until TLS or SASL say otherwise) and hands it to every request's
context; handlers pass it to the authorizer through `RequestContext.authorize`.
"""
from __future__ import annotations

import ipaddress
from dataclasses import dataclass

from .principal import ANONYMOUS, KafkaPrincipal


@dataclass
class Session:
    principal: KafkaPrincipal = ANONYMOUS
    client_host: str = ""               # the client's IP address, which ACLs' hosts match
    listener_name: str = "PLAINTEXT"
    security_protocol: str = "PLAINTEXT"  # PLAINTEXT | SSL | SASL_PLAINTEXT | SASL_SSL
    sasl_mechanism: str | None = None   # once SASL has authenticated the connection
    client_software_name: str | None = None     # what the client said about itself in ApiVersions v3+ (KIP-511)
    client_software_version: str | None = None


def host_address(address: str) -> str:
    """An IP address as Java's InetAddress.getHostAddress writes it, which is what Kafka matches ACLs' hosts
    against: IPv4 as is; IPv6 as eight groups of hex without leading zeros and without `::` compression
    (`::1` -> `0:0:0:0:0:0:0:1`); an IPv4-mapped IPv6 address as its IPv4 address (Java makes it an Inet4Address)."""
    try:
        ip = ipaddress.ip_address(address.split("%", 1)[0])
    except ValueError:
        return address
    if ip.version == 4:
        return str(ip)
    if ip.ipv4_mapped is not None:
        return str(ip.ipv4_mapped)
    return ":".join(format(int(group, 16), "x") for group in ip.exploded.split(":"))

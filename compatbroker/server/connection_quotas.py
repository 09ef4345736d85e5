"""Connection limits, as Kafka's ConnectionQuotas applies them at accept time.

- `max.connections`: connections the broker holds at once. When reached, the server stops accepting (new
  connections wait in the listen backlog) until one closes.
- `max.connections.per.ip`: connections from one address. Over it, the new connection is closed at once and one
  INFO line says so. `max.connections.per.ip.overrides` sets other limits for some hosts or addresses; a host name
  is resolved when the server starts (and when the limits are reconfigured) and its limit applies to the addresses
  it resolves to.

The limits change at run time with the dynamic broker configs (`reconfigure`), from the next accept on.
"""
from __future__ import annotations

import logging
import socket
from collections import Counter
from collections.abc import Mapping

log = logging.getLogger(__name__)


class ConnectionQuotas:
    def __init__(self, max_connections: int, max_per_ip: int, per_ip_overrides: Mapping[str, int]):
        self.max_connections = max_connections
        self.max_per_ip = max_per_ip
        self._overrides = dict(per_ip_overrides)  # address -> limit
        self._configured_overrides: dict[str, int] = {}  # host -> limit, as configured (before resolving)
        self._per_ip: Counter[str] = Counter()
        self.total = 0

    @classmethod
    def from_config(cls, config) -> ConnectionQuotas:
        """The quotas of a BrokerConfig; host names of the overrides are resolved here (ValueError naming the host
        when one cannot be, which stops the broker from starting, as in Kafka)."""
        overrides = {}
        for host, limit in config.max_connections_per_ip_overrides.items():
            try:
                addresses = resolve(host)
            except OSError as exc:
                raise ValueError(f"max.connections.per.ip.overrides: cannot resolve {host}: "
                                 f"{exc.strerror or exc}") from None
            for address in addresses:
                overrides[address] = limit
        quotas = cls(config.max_connections, config.max_connections_per_ip, overrides)
        quotas._configured_overrides = dict(config.max_connections_per_ip_overrides)
        return quotas

    def reconfigure(self, config) -> None:
        """Take the limits of a new BrokerConfig (dynamic broker configs); the connections counted stay. The override
        hosts are resolved again only when the overrides changed. ValueError as from_config, with the limits left
        as they were."""
        if config.max_connections_per_ip_overrides != self._configured_overrides:
            fresh = ConnectionQuotas.from_config(config)
            self._overrides, self._configured_overrides = fresh._overrides, fresh._configured_overrides
        self.max_connections, self.max_per_ip = config.max_connections, config.max_connections_per_ip

    @property
    def full(self) -> bool:
        """max.connections reached: accept nothing until a connection closes."""
        return self.total >= self.max_connections

    def limit_for(self, address: str) -> int:
        return self._overrides.get(address, self.max_per_ip)

    def try_add(self, address: str) -> bool:
        """Count a new connection from `address`; False (with Kafka's log line) when that address is at its limit."""
        limit = self.limit_for(address)
        if self._per_ip[address] >= limit:
            log.info("Rejected connection from %s, address already has the configured maximum of %d connections.",
                     address, limit)
            return False
        self._per_ip[address] += 1
        self.total += 1
        return True

    def remove(self, address: str) -> None:
        self.total -= 1
        self._per_ip[address] -= 1
        if self._per_ip[address] <= 0:
            del self._per_ip[address]


def resolve(host: str) -> list[str]:
    """The addresses of a host name (or the address itself, in its canonical text)."""
    infos = socket.getaddrinfo(host, None, type=socket.SOCK_STREAM)
    addresses = []
    for family, _, _, _, sockaddr in infos:
        if family in (socket.AF_INET, socket.AF_INET6) and sockaddr[0] not in addresses:
            addresses.append(sockaddr[0])
    return addresses

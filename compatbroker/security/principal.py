"""Who a connection is: Kafka's principal, `Type:name` (`User:alice`).

A PLAINTEXT connection, and an SSL one without a client certificate, is `User:ANONYMOUS`; SASL makes the principal
`User:<authenticated name>`, and a client certificate `User:<subject DN mapped by ssl.principal.mapping.rules>`.
ACLs, `super.users` and the authorizer's log lines name principals in this `Type:name` form.
"""
from __future__ import annotations

from dataclasses import dataclass

USER_TYPE = "User"


@dataclass(frozen=True)
class KafkaPrincipal:
    principal_type: str
    name: str

    def __str__(self) -> str:
        return f"{self.principal_type}:{self.name}"


ANONYMOUS = KafkaPrincipal(USER_TYPE, "ANONYMOUS")


def parse_principal(text: str) -> KafkaPrincipal:
    """`User:alice` -> KafkaPrincipal("User", "alice"); ValueError without the `Type:` part (Kafka's
    SecurityUtils.parseKafkaPrincipal)."""
    principal_type, separator, name = text.partition(":")
    if not separator or not principal_type:
        raise ValueError(f"expected a string in format principalType:principalName but got {text}")
    return KafkaPrincipal(principal_type, name)

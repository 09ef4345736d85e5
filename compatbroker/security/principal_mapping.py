"""The principal of a TLS client: its certificate's subject, mapped by `ssl.principal.mapping.rules` (Kafka's
SslPrincipalMapper and DefaultKafkaPrincipalBuilder).

Rules are a comma-separated list, tried in order; the first that applies gives the name:
- `DEFAULT`: the distinguished name unchanged;
- `RULE:pattern/replacement/` with an optional `L` or `U` after the last slash (lower or upper case the result):
  applies when the regular expression matches the whole DN; the name is the DN with every match replaced
  (`$1` refers to a group; a `$n` beyond the groups stays literal, as in Kafka).
A DN no rule applies to fails the connection ("No rules apply to ...").

The DN is the subject in RFC 2253 form, most specific part first (`CN=alice,OU=eng,O=Acme`, other attributes than
the RFC's keywords as `OID=#hex`), as Java's X500Principal.getName() gives it; a client without a certificate is
`User:ANONYMOUS`. `cryptography` reads the certificate and is imported only when a client presents one.
"""
from __future__ import annotations

import functools
import re
from dataclasses import dataclass

from .principal import ANONYMOUS, KafkaPrincipal

DEFAULT_RULES = "DEFAULT"

_RULE = r"(DEFAULT)|RULE:((\\.|[^\\/])*)/((\\.|[^\\/])*)/([LU]?).*?|(.*?)"
_RULE_SPLITTER = re.compile(r"\s*(" + _RULE + r")\s*(,\s*|$)")
_RULE_PARSER = re.compile(_RULE)
_BACK_REFERENCE = re.compile(r"\$(\d+)")


class NoMatchingRule(ValueError):
    pass


@dataclass(frozen=True)
class _Rule:
    pattern: re.Pattern | None = None  # None: DEFAULT
    replacement: str = ""
    case: str = ""                      # "L", "U" or ""

    def apply(self, dn: str) -> str | None:
        if self.pattern is None:
            return dn
        if self.pattern.fullmatch(dn) is None:
            return None
        result = self.pattern.sub(_python_replacement(self.replacement, self.pattern.groups), dn)
        if self.case == "L":
            return result.lower()
        if self.case == "U":
            return result.upper()
        return result

    def __str__(self) -> str:
        if self.pattern is None:
            return "DEFAULT"
        suffix = f"/{self.case}" if self.case else ""
        return f"RULE:{self.pattern.pattern}/{self.replacement}{suffix}"


class SslPrincipalMapper:
    """Parsed `ssl.principal.mapping.rules`; ValueError with Kafka's message for a bad rule."""

    def __init__(self, rules: str | None = None):
        text = DEFAULT_RULES if rules is None else rules  # an empty text is no rule at all, as in Kafka
        self.rules = [rule for rule in map(_parse_rule, _split(text)) if rule is not None]

    def name(self, dn: str) -> str:
        for rule in self.rules:
            name = rule.apply(dn)
            if name is not None:
                return name
        raise NoMatchingRule(f"No rules apply to {dn}, rules [{', '.join(map(str, self.rules))}]")


def _split(text: str) -> list[str]:
    return [match.group(1) for match in _RULE_SPLITTER.finditer(text.strip())]


def _parse_rule(rule: str) -> _Rule | None:
    match = _RULE_PARSER.match(rule)
    if match is None:
        raise ValueError(f"Invalid rule: {rule}")
    if match.end() != len(rule):
        raise ValueError(f"Invalid rule: `{rule}`, unmatched substring: `{rule[match.end():]}`")
    if match.group(1) is not None:
        return _Rule()
    if match.group(2) is not None:
        try:
            pattern = re.compile(match.group(2))
        except re.error as exc:
            raise ValueError(f"Invalid rule: {rule}: {exc}") from None
        return _Rule(pattern, match.group(4), match.group(6))
    return None  # an empty rule is ignored


def _python_replacement(replacement: str, groups: int):
    """Java's replacement syntax (`$n` a group, `\\x` a literal x) as a function for re.sub; a `$n` naming a
    group the pattern lacks is cut down digit by digit, and when no group is left it stays literal (Kafka)."""
    parts: list = []
    index = 0
    while index < len(replacement):
        char = replacement[index]
        if char == "\\" and index + 1 < len(replacement):
            parts.append(replacement[index + 1])
            index += 2
            continue
        reference = _BACK_REFERENCE.match(replacement, index) if char == "$" else None
        if reference is None:
            parts.append(char)
            index += 1
            continue
        digits = reference.group(1)
        while len(digits) > 1 and int(digits) > groups:  # Java reads as many digits as name a group
            digits = digits[:-1]
        group = int(digits) if int(digits) <= groups else None
        if group is None:
            parts.append(reference.group(0))
            index = reference.end()
        else:
            parts.append(group)
            index += 1 + len(digits)
    return lambda match: "".join(part if isinstance(part, str) else (match.group(part) or "") for part in parts)


def subject_dn(der: bytes) -> str:
    """The subject of a DER certificate in RFC 2253 form as Java's X500Principal.getName() writes it: the most
    specific part first, the keywords CN, C, L, ST, O, OU, STREET, DC and UID, and any other attribute (e.g.
    emailAddress) as its OID and `#` + the hex of its DER value."""
    from cryptography import x509  # only when a client presents a certificate

    subject = x509.load_der_x509_certificate(der).subject
    return ",".join("+".join(map(_rfc2253_attribute, rdn)) for rdn in reversed(subject.rdns))


_RFC2253_KEYWORDS = {"2.5.4.3", "2.5.4.6", "2.5.4.7", "2.5.4.8", "2.5.4.10", "2.5.4.11", "2.5.4.9",
                     "0.9.2342.19200300.100.1.25", "0.9.2342.19200300.100.1.1"}  # CN C L ST O OU STREET DC UID


def _rfc2253_attribute(attribute) -> str:
    if attribute.oid.dotted_string in _RFC2253_KEYWORDS:
        return attribute.rfc4514_string()
    tag = getattr(getattr(attribute, "_type", None), "value", 12)  # the string type; UTF8String when unknown
    encoding = {30: "utf-16-be", 28: "utf-32-be"}.get(tag, "utf-8")  # BMPString, UniversalString
    value = attribute.value.encode(encoding) if isinstance(attribute.value, str) else bytes(attribute.value)
    return f"{attribute.oid.dotted_string}=#{_der(tag, value).hex()}"


def _der(tag: int, value: bytes) -> bytes:
    length = len(value)
    if length < 0x80:
        return bytes([tag, length]) + value
    size = length.to_bytes((length.bit_length() + 7) // 8, "big")
    return bytes([tag, 0x80 | len(size)]) + size + value


def principal_from_certificate(der: bytes | None, mapper: SslPrincipalMapper) -> KafkaPrincipal:
    """The principal of an SSL connection: ANONYMOUS without a client certificate, else `User:<mapped DN>`.
    ValueError (Kafka's message) when no rule applies."""
    if not der:
        return ANONYMOUS
    dn = subject_dn(der)
    try:
        return KafkaPrincipal("User", mapper.name(dn))
    except NoMatchingRule as exc:
        raise ValueError(f"Failed to map name for '{dn}' based on SSL principal mapping rules: {exc}") from None


@functools.lru_cache(maxsize=32)
def mapper_for(rules: str | None) -> SslPrincipalMapper:
    """The mapper of a listener's rules, parsed once."""
    return SslPrincipalMapper(rules)

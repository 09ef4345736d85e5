"""Regular expression subscriptions of KIP-848 consumer groups (ConsumerGroupHeartbeat's SubscribedTopicRegex), as
Kafka's group coordinator resolves them.

- A pattern is compiled as RE2/J compiles it (`compatbroker/re2j.py`: RE2, linear-time matching whatever a client
  sends). One that does not compile is INVALID_REGULAR_EXPRESSION (`InvalidRegex`), with Kafka's message
  "SubscribedTopicRegex `P` is not a valid regular expression: D." where D is RE2/J's description of the error.
- A topic matches when the pattern matches its WHOLE name (RE2/J's `Matcher.matches()`): `orders` matches the
  topic `orders` only, `orders.*` also `orders-eu`.
- Every topic of the cluster is a candidate, internal topics included: Kafka's `refreshRegularExpressions` scans
  every topic name of the metadata image and filters only by the member's TOPIC DESCRIBE permission (`resolve`
  takes that filter as `authorized`).
"""
from __future__ import annotations

from collections.abc import Callable, Iterable

from ...protocol.error_codes import ErrorCode
from ...re2j import PatternError, compile_pattern

__all__ = ["InvalidRegex", "compile_regex", "resolve", "topics_matching"]


class InvalidRegex(ValueError):
    """A SubscribedTopicRegex RE2/J refuses: answered INVALID_REGULAR_EXPRESSION with `message`."""

    error_code = ErrorCode.INVALID_REGULAR_EXPRESSION

    def __init__(self, pattern: str, description: str):
        self.pattern = pattern
        self.description = description
        self.message = f"SubscribedTopicRegex `{pattern}` is not a valid regular expression: {description}."
        super().__init__(self.message)


def compile_regex(pattern: str):
    """The compiled pattern (`re2j.compile_pattern`, cached). Raises InvalidRegex."""
    try:
        return compile_pattern(pattern)
    except PatternError as exc:
        raise InvalidRegex(pattern, exc.description) from None


def topics_matching(pattern, topic_names: Iterable[str]) -> frozenset[str]:
    """The names the pattern (text or compiled) matches in full. Raises InvalidRegex for text that does not
    compile."""
    regex = compile_regex(pattern) if isinstance(pattern, str) else pattern
    return frozenset(name for name in topic_names if regex.fullmatch(name))


def resolve(regexes: Iterable[str], topic_names: Iterable[str],
            authorized: Callable[[str], bool] | None = None) -> dict[str, frozenset[str]]:
    """Kafka's refreshRegularExpressions: each regex with the topics it matches, keeping only those `authorized`
    accepts (TOPIC DESCRIBE of the member whose heartbeat asked) when given. A regex that does not compile (it was
    checked when a member sent it, so this should not happen) resolves to no topic."""
    names = list(topic_names)
    resolved = {}
    for regex in dict.fromkeys(regexes):
        try:
            resolved[regex] = topics_matching(regex, names)
        except InvalidRegex:
            resolved[regex] = frozenset()
    if authorized is not None:
        allowed = {name: authorized(name) for name in set().union(*resolved.values())} if resolved else {}
        resolved = {regex: frozenset(name for name in topics if allowed[name]) for regex, topics in resolved.items()}
    return resolved

"""Regular expressions as Kafka compiles them with RE2/J (a client's transactional id pattern, a consumer group's
subscribed topic regex), run by RE2 (`google-re2`), the engine RE2/J ports: the same patterns compile
(backreferences, lookaround, atomic groups and possessive quantifiers do not; repetition counts stop at 1000), and
matching takes linear time, so no pattern a client sends can stall the broker.

`compile_pattern` raises `PatternError` whose `description` is RE2/J's text for the error (what Kafka puts in its
messages, e.g. "missing closing )"), translated from RE2's own. It keeps the 256 small patterns last used compiled;
a large one is compiled on each use, so that clients cannot fill memory with them.
"""
from __future__ import annotations

from collections import OrderedDict

import re2

__all__ = ["PatternError", "compile_pattern"]

_OPTIONS = re2.Options()
_OPTIONS.log_errors = False  # a client's bad pattern is answered, not logged by RE2

# Compiled patterns kept for reuse, least recently used first. Only small ones are kept: a client could otherwise
# park hundreds of megabyte-sized patterns and programs here (RE2 lets one program grow to 8 MiB).
_CACHE: OrderedDict[str, object] = OrderedDict()
_CACHE_SIZE = 256
_CACHED_PATTERN_MAX = 1_000  # characters, and RE2 instructions; the patterns clients send need a few dozen

# RE2's error texts -> RE2/J's descriptions (Go's regexp/syntax wording, which RE2/J keeps).
_RE2J_DESCRIPTIONS = {
    "missing )": "missing closing )",
    "missing ]": "missing closing ]",
    "trailing \\": "trailing backslash at end of expression",
    "no argument for repetition operator": "missing argument to repetition operator",
    "invalid repetition size": "invalid repeat count",
    "bad repetition operator": "invalid nested repetition operator",
    "invalid perl operator": "invalid or unsupported Perl syntax",
    "invalid named capture group": "invalid named capture",
}


class PatternError(ValueError):
    """A pattern RE2/J refuses; `description` is RE2/J's wording of why."""

    def __init__(self, pattern: str, description: str):
        super().__init__(f"error parsing regexp: {description}: `{pattern}`")
        self.pattern = pattern
        self.description = description


def compile_pattern(pattern: str):
    """The compiled pattern (cached when small: clients send the same few again and again); match a whole string
    with its `fullmatch`, as RE2/J's `Matcher.matches()`. Raises PatternError."""
    compiled = _CACHE.get(pattern)
    if compiled is not None:
        _CACHE.move_to_end(pattern)
        return compiled
    try:
        compiled = re2._Regexp(pattern, _OPTIONS)  # not re2.compile, whose own cache keeps 128 of any size
    except re2.error as exc:
        raise PatternError(pattern, _description(exc)) from None
    if len(pattern) <= _CACHED_PATTERN_MAX and compiled.programsize <= _CACHED_PATTERN_MAX:
        _CACHE[pattern] = compiled
        if len(_CACHE) > _CACHE_SIZE:
            _CACHE.popitem(last=False)
    return compiled


def _description(exc: re2.error) -> str:
    text = exc.args[0] if exc.args else str(exc)
    if isinstance(text, bytes):
        text = text.decode("utf-8", "replace")
    code = text.split(": ", 1)[0]  # RE2: "<error>: <offending part>"
    return _RE2J_DESCRIPTIONS.get(code, code)

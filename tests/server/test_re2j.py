"""compatbroker.re2j: RE2/J's errors, and a cache of compiled patterns that clients cannot fill with large ones."""
from __future__ import annotations

import pytest

from compatbroker.re2j import PatternError, compile_pattern


def test_small_patterns_are_compiled_once():
    assert compile_pattern("orders-.*") is compile_pattern("orders-.*")
    assert compile_pattern("orders-.*").fullmatch("orders-eu")


def test_large_patterns_are_not_kept():
    pattern = "(" + "|".join(f"topic-{i}" for i in range(2_000)) + ")"
    first = compile_pattern(pattern)
    assert first.fullmatch("topic-1999")
    assert compile_pattern(pattern) is not first


def test_an_invalid_pattern_says_why_in_re2js_words():
    with pytest.raises(PatternError) as error:
        compile_pattern("(orders")
    assert error.value.description == "missing closing )"

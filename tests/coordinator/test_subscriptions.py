"""Regex subscriptions of KIP-848 consumer groups (`consumer_group/subscriptions.py`): RE2/J syntax, whole-name
matching, Kafka's INVALID_REGULAR_EXPRESSION message, resolution over every topic with the DESCRIBE filter."""
from __future__ import annotations

import pytest

from compatbroker.coordinator.consumer_group.subscriptions import (InvalidRegex, compile_regex, resolve,
                                                                    topics_matching)
from compatbroker.protocol.error_codes import ErrorCode

TOPICS = ["orders", "orders-eu", "reorders", "payments", "__consumer_offsets", "__transaction_state"]


@pytest.mark.parametrize("pattern, matched", [
    ("orders", {"orders"}),                                   # the whole name, not a part of it
    ("orders.*", {"orders", "orders-eu"}),
    (".*orders.*", {"orders", "orders-eu", "reorders"}),
    ("^orders$", {"orders"}),
    ("orders|payments", {"orders", "payments"}),
    ("(?i)ORDERS", {"orders"}),
    (r"\Qorders-eu\E", {"orders-eu"}),
    ("", set()),
])
def test_a_pattern_matches_whole_topic_names(pattern, matched):
    assert topics_matching(pattern, TOPICS) == matched


def test_internal_topics_are_candidates_as_in_kafka():
    # Kafka's refreshRegularExpressions scans every topic of the metadata image, internal ones included
    assert topics_matching("__.*", TOPICS) == {"__consumer_offsets", "__transaction_state"}


@pytest.mark.parametrize("pattern, description", [
    ("(", "missing closing )"),
    ("a)", "unexpected )"),
    ("[a", "missing closing ]"),
    ("*", "missing argument to repetition operator"),
    ("a**", "invalid nested repetition operator"),
    ("x{1001}", "invalid repeat count"),
    ("(?=x)", "invalid or unsupported Perl syntax"),     # lookahead
    (r"(a)\1", "invalid escape sequence"),               # backreference
    ("[z-a]", "invalid character class range"),
    ("a\\", "trailing backslash at end of expression"),
])
def test_patterns_re2j_refuses_are_invalid_regular_expressions(pattern, description):
    with pytest.raises(InvalidRegex) as raised:
        compile_regex(pattern)
    assert raised.value.error_code is ErrorCode.INVALID_REGULAR_EXPRESSION
    assert raised.value.message == f"SubscribedTopicRegex `{pattern}` is not a valid regular expression: {description}."


def test_a_compiled_pattern_is_accepted_and_reused():
    assert compile_regex("orders.*") is compile_regex("orders.*")
    assert topics_matching(compile_regex("pay.*"), TOPICS) == {"payments"}


def test_matching_takes_linear_time_on_a_pathological_pattern():
    # catastrophic for a backtracking engine; RE2 answers at once (a generous bound would still catch a hang)
    assert topics_matching("(a+)+b", ["a" * 5000]) == frozenset()


def test_resolve_maps_each_regex_and_filters_by_permission():
    resolved = resolve(["orders.*", "pay.*", "orders.*", "("], TOPICS, authorized=lambda topic: topic != "orders-eu")
    assert resolved == {"orders.*": {"orders"}, "pay.*": {"payments"}, "(": frozenset()}
    assert resolve(["x.*"], TOPICS) == {"x.*": frozenset()}
    assert resolve([], TOPICS, authorized=lambda topic: True) == {}

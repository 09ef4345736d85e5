"""What the handler modules declare (ApiVersions is built from it), and the topic name rules they share."""
from __future__ import annotations

import pytest

from compatbroker import topic_names
from compatbroker.handlers import build_registry
from compatbroker.protocol import API_KEYS

MODULES = ["metadata", "produce", "list_offsets", "fetch"]


def test_every_schema_version_is_declared_and_none_is_unstable():
    registry = build_registry(MODULES)  # refuses ranges outside the schemas and unstable versions
    for api_key, module in registry.items():
        request_cls = API_KEYS[api_key][0]
        assert (module.MIN_VERSION, module.MAX_VERSION) == request_cls.VALID_VERSIONS
        assert not getattr(request_cls, "LATEST_VERSION_UNSTABLE", False)
        assert module.__doc__.startswith(request_cls.NAME.removesuffix("Request"))


@pytest.mark.parametrize("name", ["a", "A-z_0.9", "x" * 249, "__consumer_offsets", "..."])
def test_legal_names(name):
    assert topic_names.is_valid(name)
    topic_names.validate(name)


@pytest.mark.parametrize("name", [None, "", ".", "..", "x" * 250, "white space", "tab\t", "é", "a/b", "a:b"])
def test_illegal_names(name):
    assert not topic_names.is_valid(name)
    with pytest.raises(topic_names.InvalidTopicName) as raised:
        topic_names.validate(name)
    assert raised.value.error_code == 17


def test_collisions_between_dot_and_underscore():
    assert topic_names.collides("a.b", "a_b") and not topic_names.collides("a.b", "a-b")
    assert topic_names.find_collision("a_b", ["a.b", "c"]) == "a.b"
    assert topic_names.find_collision("a.b", ["a.b"]) is None  # the topic itself is no collision
    assert topic_names.find_collision("ab", ["a.b"]) is None


def test_internal_topics():
    assert topic_names.is_internal("__consumer_offsets") and topic_names.is_internal("__transaction_state")
    assert not topic_names.is_internal("__consumer_offsets2")

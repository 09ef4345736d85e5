"""What the handler modules declare (ApiVersions is built from it), and the topic name rules they share."""
from __future__ import annotations

import pytest

from compatbroker import topic_names
from compatbroker.handlers import HANDLER_MODULES, build_registry
from compatbroker.protocol import API_KEYS

# Handlers serving fewer versions than the schema carries, and why.
NARROWER = {"init_producer_id": "v6 is unstable in Kafka 4.3 (transactions v2)"}


@pytest.mark.parametrize("name", HANDLER_MODULES)
def test_every_schema_version_is_declared_and_none_is_unstable(name):
    registry = build_registry([name])  # refuses ranges outside the schemas and unstable versions
    ((api_key, module),) = registry.items()
    request_cls = API_KEYS[api_key][0]
    if name not in NARROWER:
        assert (module.MIN_VERSION, module.MAX_VERSION) == request_cls.VALID_VERSIONS
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

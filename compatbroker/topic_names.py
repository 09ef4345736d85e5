"""Kafka's rules for topic names, and the names of the topics the broker keeps for itself.

A legal name is 1 to 249 characters from ASCII letters, digits, '.', '_' and '-', and is neither "." nor "..".
Names that differ only by '.' versus '_' collide: Kafka refuses to create the second one, because both map to the
same metric names.
"""
from __future__ import annotations

import re

MAX_NAME_LENGTH = 249

GROUP_METADATA_TOPIC = "__consumer_offsets"
TRANSACTION_STATE_TOPIC = "__transaction_state"
SHARE_GROUP_STATE_TOPIC = "__share_group_state"
CLUSTER_METADATA_TOPIC = "__cluster_metadata"  # KRaft's metadata log: no client may create a topic of this name
INTERNAL_TOPICS = frozenset({GROUP_METADATA_TOPIC, TRANSACTION_STATE_TOPIC, SHARE_GROUP_STATE_TOPIC})

INVALID_TOPIC_EXCEPTION = 17  # Kafka's error code for a name that breaks these rules

_LEGAL = re.compile(r"[a-zA-Z0-9._-]+")


class InvalidTopicName(ValueError):
    """A topic name breaks Kafka's rules; `error_code` is INVALID_TOPIC_EXCEPTION."""

    error_code = INVALID_TOPIC_EXCEPTION


def invalid_reason(name: str | None) -> str | None:
    """Why `name` is not a legal topic name, or None when it is. The reasons are Kafka's, since clients show them
    to users in CreateTopics error messages."""
    if name is None:
        return "a topic name is required"
    if not name:
        return "the empty string is not allowed"
    if name in (".", ".."):
        return f"'{name}' is not allowed"
    if len(name) > MAX_NAME_LENGTH:
        return f"the length of '{name}' is longer than the max allowed length {MAX_NAME_LENGTH}"
    if not _LEGAL.fullmatch(name):
        return f"'{name}' contains one or more characters other than ASCII alphanumerics, '.', '_' and '-'"
    return None


def is_valid(name: str | None) -> bool:
    return invalid_reason(name) is None


def validate(name: str | None) -> None:
    """Raise InvalidTopicName unless `name` is legal."""
    reason = invalid_reason(name)
    if reason is not None:
        raise InvalidTopicName(f"Topic name is invalid: {reason}")


def is_internal(name: str | None) -> bool:
    return name in INTERNAL_TOPICS


def has_collision_chars(name: str) -> bool:
    return "." in name or "_" in name


def unify_collision_chars(name: str) -> str:
    """The form two colliding names share (only used to compare names, never as a name)."""
    return name.replace(".", "_")


def collides(a: str, b: str) -> bool:
    return unify_collision_chars(a) == unify_collision_chars(b)


def find_collision(name: str, existing) -> str | None:
    """An existing topic, other than `name` itself, whose name collides with `name`; None if there is none."""
    if not has_collision_chars(name):
        return None
    unified = unify_collision_chars(name)
    for other in existing:
        if other != name and unify_collision_chars(other) == unified:
            return other
    return None

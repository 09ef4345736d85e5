"""Parsing the values of Kafka settings as a properties file or code gives them: integers, booleans, lists and
Kafka's null default for strings. Shared by the broker's configuration (compatbroker.config) and the security
settings (compatbroker.security.settings)."""
from __future__ import annotations

from typing import Any


def parse_int(value: Any) -> int:
    if isinstance(value, bool):
        raise ValueError("expected an integer")
    return int(value.strip()) if isinstance(value, str) else int(value)


def parse_bool(value: Any) -> bool:
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text not in ("true", "false"):
        raise ValueError("expected true or false")
    return text == "true"


def parse_optional_str(value: Any) -> str | None:
    """Kafka's null default for a string: an empty value means unset."""
    text = None if value is None else str(value).strip()
    return text or None


def parse_list(value: Any) -> tuple[str, ...]:
    items = value if isinstance(value, (list, tuple)) else str(value).split(",")
    return tuple(item.strip() for item in items if item.strip())

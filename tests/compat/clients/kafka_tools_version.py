"""The version the matrix's "kafka-tools" row shows: Kafka's, from the tool jars COMPATBROKER_KAFKA_TOOLS names
(tests/compat/kafka_tools.py), or that they are not set."""
from __future__ import annotations


def version(name: str) -> str:
    from ..kafka_tools import installed_version
    return installed_version()

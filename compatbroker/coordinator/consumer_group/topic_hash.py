"""The metadata hash of a KIP-848 consumer group (ConsumerGroupMetadataValue.MetadataHash, Kafka 4.1+, KIP-1101),
computed as Kafka computes it, so that the value in `__consumer_offsets` is Kafka's.

Kafka hashes with XXH3-64 (seed 0, the default secret), fed the way hash4j's HashStream feeds it: little-endian
integers, a string as its UTF-16 code units followed by its length (int32). Per topic: a version byte (0), the
topic id's most and least significant halves, the name, the partition count, then each partition's index and the
sorted racks of its replicas (each preceded by its length). The group's hash is XXH3-64 of its subscribed topics'
hashes in topic name order; 0 when it subscribes to no existing topic. A change of the hash (partitions added, a
topic recreated, racks moved) is what makes the coordinator bump the group epoch.

XXH3 itself comes from the `xxhash` package (the reference C implementation).
"""
from __future__ import annotations

import functools
import struct
import uuid
from collections.abc import Iterable, Mapping

import xxhash

__all__ = ["metadata_hash", "topic_hash", "xxh3_64"]

TOPIC_HASH_MAGIC = 0  # Kafka's TOPIC_HASH_MAGIC_BYTE
_MASK = (1 << 64) - 1


def xxh3_64(data: bytes) -> int:
    """XXH3-64 of `data` with seed 0 and the default secret, as an unsigned 64-bit integer."""
    return xxhash.xxh3_64_intdigest(data)


# --- Kafka's hashes -----------------------------------------------------------------------------------------------

class _Stream:
    """The bytes hash4j's HashStream would feed XXH3 (little-endian; strings as UTF-16 units, then their length)."""

    def __init__(self):
        self._parts: list[bytes] = []

    def put_byte(self, value: int) -> _Stream:
        self._parts.append(struct.pack("<b", value))
        return self

    def put_int(self, value: int) -> _Stream:
        self._parts.append(struct.pack("<i", value))
        return self

    def put_long(self, value: int) -> _Stream:
        self._parts.append(struct.pack("<q", _signed(value)))
        return self

    def put_string(self, text: str) -> _Stream:
        units = text.encode("utf-16-le", "surrogatepass")
        self._parts.append(units)
        return self.put_int(len(units) // 2)

    def hash(self) -> int:
        return _signed(xxh3_64(b"".join(self._parts)))


def _signed(value: int) -> int:
    return value - (1 << 64) if value >= 1 << 63 else value


@functools.lru_cache(maxsize=4096)
def _topic_hash(name: str, topic_id: uuid.UUID, partitions: int, racks: tuple[tuple[str, ...], ...]) -> int:
    stream = _Stream().put_byte(TOPIC_HASH_MAGIC)
    stream.put_long(topic_id.int >> 64).put_long(topic_id.int & _MASK)
    stream.put_string(name).put_int(partitions)
    for partition in range(partitions):
        stream.put_int(partition)
        for rack in (racks[partition] if partition < len(racks) else ()):
            stream.put_int(len(rack.encode("utf-16-le", "surrogatepass")) // 2).put_string(rack)
    return stream.hash()


def topic_hash(name: str, topic_id: uuid.UUID, partitions: int,
               racks: Mapping[int, Iterable[str]] | None = None) -> int:
    """Kafka's computeTopicHash (a signed 64-bit value); `racks`: each partition's replicas' racks, if any."""
    by_partition = tuple(tuple(sorted((racks or {}).get(p, ()))) for p in range(partitions)) if racks else ()
    return _topic_hash(name, topic_id, partitions, by_partition)


def metadata_hash(topics: Iterable[tuple]) -> int:
    """Kafka's computeGroupHash over the subscribed topics that exist, given as (name, topic id, partition count[,
    racks by partition]); 0 when there are none."""
    hashes = sorted((topic[0], topic_hash(*topic)) for topic in topics)
    if not hashes:
        return 0
    stream = _Stream()
    for _, value in hashes:
        stream.put_long(value)
    return stream.hash()

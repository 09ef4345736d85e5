"""Which partition a produced record goes to, as Apache Kafka's Java producer decides by default.

- A record with an explicit partition goes there.
- `murmur2` (the default, Java's built-in partitioner): a record with a key goes to
  `toPositive(murmur2(key)) % partitions` (so keyed records land where every Java, kafka-python or Kafka Streams
  producer puts them); a record without a key goes to a "sticky" partition, picked at random among the partitions
  that have a leader and kept until `batch.size` bytes have gone to it (KIP-480/KIP-794), so that keyless records
  fill whole batches.
- `round-robin` (Java's RoundRobinPartitioner): every record, keyed or not, to the next partition in turn, among
  those that have a leader when any do.
- `random`: every record, keyed or not, to a uniformly random partition (librdkafka's `random`).

Pure: no I/O. The producer passes the partition count and the partitions that have a leader.
"""
from __future__ import annotations

import random
from collections.abc import Sequence

__all__ = ["PARTITIONERS", "DefaultPartitioner", "RandomPartitioner", "RoundRobinPartitioner", "make_partitioner",
           "murmur2", "murmur2_partition", "to_positive"]

_MASK32 = 0xFFFFFFFF
_SEED = 0x9747B28C
_M = 0x5BD1E995
_R = 24


def murmur2(data: bytes) -> int:
    """Kafka's 32-bit murmur2 hash (Utils.murmur2) of `data`, as a signed int like Java's."""
    length = len(data)
    h = (_SEED ^ length) & _MASK32
    whole = length & ~3
    for i in range(0, whole, 4):
        k = data[i] | (data[i + 1] << 8) | (data[i + 2] << 16) | (data[i + 3] << 24)
        k = (k * _M) & _MASK32
        k ^= k >> _R
        k = (k * _M) & _MASK32
        h = (h * _M) & _MASK32
        h ^= k
    tail = length & 3
    if tail:
        if tail == 3:
            h ^= data[whole + 2] << 16
        if tail >= 2:
            h ^= data[whole + 1] << 8
        h ^= data[whole]
        h = (h * _M) & _MASK32
    h ^= h >> 13
    h = (h * _M) & _MASK32
    h ^= h >> 15
    return h - (1 << 32) if h & 0x80000000 else h


def to_positive(number: int) -> int:
    """Java's Utils.toPositive: the low 31 bits (not abs(), which overflows for Integer.MIN_VALUE)."""
    return number & 0x7FFFFFFF


def murmur2_partition(key: bytes, num_partitions: int) -> int:
    """The partition the Java client's default partitioner gives a keyed record."""
    return to_positive(murmur2(key)) % num_partitions


class DefaultPartitioner:
    """murmur2 of the key; sticky partitions for keyless records, switched after `batch_size` bytes."""

    name = "murmur2"

    def __init__(self, batch_size: int = 16384, rng: random.Random | None = None):
        self.batch_size = batch_size
        self._rng = rng or random.Random()
        self._sticky: dict[str, list[int]] = {}  # topic -> [partition, bytes produced to it]

    def partition(self, topic: str, key: bytes | None, size: int, num_partitions: int,
                  available: Sequence[int]) -> int:
        if key is not None:
            return murmur2_partition(key, num_partitions)
        sticky = self._sticky.get(topic)
        if sticky is None or sticky[1] >= self.batch_size or sticky[0] >= num_partitions:
            sticky = self._sticky[topic] = [self._next_sticky(sticky, num_partitions, available), 0]
        sticky[1] += size
        return sticky[0]

    def _next_sticky(self, previous, num_partitions: int, available: Sequence[int]) -> int:
        candidates = [p for p in (available or range(num_partitions)) if p < num_partitions]
        if previous is not None and len(candidates) > 1:
            candidates = [p for p in candidates if p != previous[0]]  # switching means moving on
        return self._rng.choice(candidates)


class RoundRobinPartitioner:
    """Each record to the next partition in turn (keys ignored), skipping partitions without a leader."""

    name = "round-robin"

    def __init__(self, batch_size: int = 16384, rng: random.Random | None = None):
        self._counters: dict[str, int] = {}

    def partition(self, topic: str, key: bytes | None, size: int, num_partitions: int,
                  available: Sequence[int]) -> int:
        turn = self._counters.get(topic, 0)
        self._counters[topic] = turn + 1
        candidates = [p for p in available if p < num_partitions]
        if candidates:
            return candidates[turn % len(candidates)]
        return turn % num_partitions


class RandomPartitioner:
    """Each record to a uniformly random partition (keys ignored)."""

    name = "random"

    def __init__(self, batch_size: int = 16384, rng: random.Random | None = None):
        self._rng = rng or random.Random()

    def partition(self, topic: str, key: bytes | None, size: int, num_partitions: int,
                  available: Sequence[int]) -> int:
        return self._rng.randrange(num_partitions)


PARTITIONERS = {cls.name: cls for cls in (DefaultPartitioner, RoundRobinPartitioner, RandomPartitioner)}


def make_partitioner(name: str, batch_size: int = 16384, rng: random.Random | None = None):
    """The partitioner called `name` (one of PARTITIONERS); ValueError for another name."""
    try:
        cls = PARTITIONERS[name]
    except KeyError:
        raise ValueError(f"unknown partitioner {name!r}: expected one of {', '.join(PARTITIONERS)}") from None
    return cls(batch_size, rng)

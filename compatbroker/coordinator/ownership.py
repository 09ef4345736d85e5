"""Which partitions of a coordinator's internal topic this node coordinates: those it leads, once loaded.

A node coordinates the groups (transactional ids) of a partition of `__consumer_offsets` (`__transaction_state`)
while it leads that partition, as in Kafka. Leadership comes and goes (`on_leadership_change`, called by the node
from the controller's listener; `refresh`, which compares with the metadata): on gaining a partition the node
replays it from its own replica (an executor job per partition) and answers COORDINATOR_LOAD_IN_PROGRESS for its
groups until that is done; on losing it the coordinator drops that partition's state at once and answers
NOT_COORDINATOR, so clients look the coordinator up again. A partition whose replica is empty needs no replay and
is loaded at once. A load that fails (the disk refused) leaves the partition uncoordinated (NOT_COORDINATOR), as
Kafka's coordinator runtime does, with one error line.

Before the internal topic exists nobody leads its partitions: a cluster of one coordinates every key itself (the
topic is created on the first write, today's single-broker behaviour); in a bigger cluster the answer is
NOT_COORDINATOR until FindCoordinator has created the topic.

The leader epoch of each partition when it was gained is kept: the transaction coordinator writes it into its
markers as the coordinator epoch, as Kafka does.
"""
from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable, Iterable

from ..protocol.error_codes import ErrorCode
from .host import CoordinatorHost

log = logging.getLogger(__name__)


def is_cluster_of_one(host: CoordinatorHost) -> bool:
    return len(host.cluster.nodes) == 1


class PartitionOwnership:
    """The loaded and loading partitions of one coordinator's internal topic on one node."""

    def __init__(self, host: CoordinatorHost, topic: str, *, load: Callable[[int], Awaitable[None]],
                 unload: Callable[[int], None]):
        self._host = host
        self.topic = topic
        self._load = load        # replays one partition into the coordinator's memory
        self._unload = unload    # drops one partition's state from it
        self.loaded: set[int] = set()
        self.loading: dict[int, asyncio.Task] = {}
        self.epochs: dict[int, int] = {}  # leader epoch of each coordinated partition when it was gained

    # --- questions ------------------------------------------------------------------------------------------------

    def error_for(self, partition: int) -> ErrorCode:
        """NONE when this node coordinates the partition's keys, COORDINATOR_LOAD_IN_PROGRESS while it loads them,
        NOT_COORDINATOR otherwise."""
        if partition in self.loaded:
            return ErrorCode.NONE
        if partition in self.loading:
            return ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
        if self._host.topic(self.topic) is None and is_cluster_of_one(self._host):
            return ErrorCode.NONE  # the topic comes with the first write
        return ErrorCode.NOT_COORDINATOR

    def coordinator_epoch(self, partition: int) -> int:
        return self.epochs.get(partition, max(self._host.leader_epoch(self.topic, partition), 0))

    def led_partitions(self) -> set[int]:
        """The partitions of the topic this node leads now, by the metadata."""
        info = self._host.topic(self.topic)
        if info is None:
            return set()
        return {p for p in range(info.partitions) if self._host.is_leader(self.topic, p)}

    # --- changes --------------------------------------------------------------------------------------------------

    def on_leadership_change(self, led: Iterable[int], lost: Iterable[int]) -> None:
        """This node now leads `led` and no longer leads `lost` (partition numbers of the topic)."""
        for partition in lost:
            self._lose(partition)
        for partition in led:
            self._gain(partition)

    def refresh(self) -> None:
        """Follow the metadata: gain what this node leads and does not coordinate yet, lose the rest."""
        led = self.led_partitions()
        known = self.loaded | set(self.loading)
        self.on_leadership_change(led - known, known - led)

    async def wait_loaded(self) -> None:
        """Return once no partition is loading (each load's failure has been logged)."""
        while self.loading:
            await asyncio.wait(list(self.loading.values()))

    async def stop(self) -> None:
        tasks = list(self.loading.values())
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        self.loading.clear()

    def _gain(self, partition: int) -> None:
        if partition in self.loaded or partition in self.loading:
            return
        replica = self._host.get_log(self.topic, partition)
        if replica is None or replica.log_end_offset <= replica.log_start_offset:
            self.epochs[partition] = max(self._host.leader_epoch(self.topic, partition), 0)
            self.loaded.add(partition)  # nothing to replay
            return
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:  # a node not serving yet: its coordinator's start() loads what it leads then
            return
        self.epochs[partition] = max(self._host.leader_epoch(self.topic, partition), 0)
        self.loading[partition] = loop.create_task(
            self._load_partition(partition), name=f"compatbroker load {self.topic}-{partition}")

    async def _load_partition(self, partition: int) -> None:
        try:
            await self._load(partition)
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # noqa: BLE001 - the partition stays uncoordinated; the node goes on
            if isinstance(exc, OSError):
                log.error("loading %s-%d failed: %s", self.topic, partition, exc)
            else:
                log.error("loading %s-%d failed", self.topic, partition, exc_info=exc)
            self._unload(partition)
        else:
            self.loaded.add(partition)
        finally:
            if self.loading.get(partition) is asyncio.current_task():
                del self.loading[partition]

    def _lose(self, partition: int) -> None:
        task = self.loading.pop(partition, None)
        if task is not None:
            task.cancel()
        was_loaded = partition in self.loaded
        self.loaded.discard(partition)
        self.epochs.pop(partition, None)
        if task is not None or was_loaded:
            self._unload(partition)
            log.info("no longer coordinating %s-%d", self.topic, partition)

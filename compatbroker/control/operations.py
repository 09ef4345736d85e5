"""The control operations: everything a test may ask of a running broker, as coroutines on the broker's loop.

The HTTP endpoint (`http.py`) maps routes onto these methods, and the embedded broker calls them directly from its
thread (`asyncio.run_coroutine_threadsafe`), so both give the same answers. Answers are plain data (dicts, lists,
strings, numbers) except record keys, values and header values, which are bytes here and base64 over HTTP.
A request that cannot be honoured raises `ControlError` with an HTTP status and a one-line reason.
"""
from __future__ import annotations

import contextlib
import logging
import os
from typing import TYPE_CHECKING

from .. import topic_names
from ..faults import FaultError
from ..protocol.records import DEFAULT_MAX_UNCOMPRESSED_SIZE, iter_batches, iter_records
from ..storage import StorageError
from ..storage.log_config import ConfigError
from . import ControlError

if TYPE_CHECKING:
    from ..server.run import BrokerRuntime

log = logging.getLogger(__name__)

DEFAULT_RECORD_LIMIT = 1000
_READ_CHUNK_BYTES = 1 << 20


class ControlOperations:
    def __init__(self, runtime: BrokerRuntime):
        self._runtime = runtime

    @property
    def _broker(self):
        return self._runtime.broker

    @property
    def _injector(self):
        return self._runtime.injector

    # --- faults ---------------------------------------------------------------------------------------------------

    async def inject_error(self, api, error, count=1, topic=None) -> dict:
        with _bad_request():
            return self._injector.inject_error(api, error, count, topic).describe()

    async def inject_latency(self, api, ms, count=None) -> dict:
        with _bad_request():
            rule = self._injector.inject_latency(api, ms, count)
        return rule.describe() if rule is not None else {"api": api, "ms": 0, "remaining": None}

    async def drop_connections_after(self, after=0, api=None, count=1) -> dict:
        with _bad_request():
            return self._injector.drop_connections_after(after, api, count).describe()

    async def clear_faults(self) -> dict:
        self._injector.clear_faults()
        return self._injector.faults()

    async def faults(self) -> dict:
        return self._injector.faults()

    # --- availability ---------------------------------------------------------------------------------------------

    async def down(self) -> dict:
        await self._runtime.server.go_down()
        return await self.status()

    async def up(self) -> dict:
        try:
            self._runtime.server.come_up()
        except OSError as exc:
            raise ControlError(409, f"cannot listen again: {exc}") from None
        return await self.status()

    async def status(self) -> dict:
        runtime = self._runtime
        return {"up": not runtime.server.is_down, "bootstrap_servers": runtime.bootstrap_servers,
                "node_id": runtime.broker.node_id, "cluster_id": runtime.broker.cluster_id,
                "data_dir": runtime.config.data_dir, "pid": os.getpid()}

    # --- topics and records ---------------------------------------------------------------------------------------

    async def topics(self) -> list[dict]:
        return [_topic(info) for info in sorted(self._broker.topics().values(), key=lambda info: info.name)]

    async def create_topic(self, name, partitions=None, configs=None) -> dict:
        """Create a topic (an existing one is returned as it is)."""
        broker = self._broker
        if not isinstance(name, str):
            raise ControlError(400, f"a topic name is a string, got {name!r}")
        if broker.topic(name) is None:
            reason = topic_names.invalid_reason(name)
            if reason is not None:
                raise ControlError(400, reason)
            collision = topic_names.find_collision(name, broker.topics())
            if collision is not None:
                raise ControlError(409, f"topic {name} collides with existing topic {collision}")
        if partitions is not None and (isinstance(partitions, bool) or not isinstance(partitions, int)
                                       or partitions < 1):
            raise ControlError(400, f"partitions must be a positive integer, got {partitions!r}")
        configs = {str(key): str(value) for key, value in (configs or {}).items()}
        try:
            info = broker.create_topic(name, partitions, configs or None)
        except (ConfigError, StorageError, ValueError) as exc:
            raise ControlError(400, f"cannot create topic {name}: {exc}") from None
        return _topic(info)

    async def records(self, topic, partition=0, offset=None, limit=DEFAULT_RECORD_LIMIT) -> list[dict]:
        """Stored records of a partition from `offset` (default: the log start), at most `limit`; control batches
        (transaction markers) are left out."""
        partition, limit = _int(partition, "partition"), _int(limit, "limit", minimum=1)
        partition_log = self._broker.get_log(topic, partition)
        if partition_log is None:
            raise ControlError(404, f"no partition {topic}-{partition}")
        position = partition_log.log_start_offset if offset is None else max(_int(offset, "offset"),
                                                                              partition_log.log_start_offset)
        found: list[dict] = []
        while position < partition_log.log_end_offset and len(found) < limit:
            data = memoryview(partition_log.read_bytes(position, _READ_CHUNK_BYTES))
            next_position = position
            for start, header in iter_batches(data, allow_partial_tail=True):
                next_position = header.next_offset
                if header.is_control:
                    continue
                for record in iter_records(data[start:start + header.size], max_size=DEFAULT_MAX_UNCOMPRESSED_SIZE):
                    if record.offset >= position and len(found) < limit:
                        found.append(_record(topic, partition, record))
            if next_position <= position:
                break  # nothing readable here (should not happen): stop rather than spin
            position = next_position
        return found

    # --- groups ---------------------------------------------------------------------------------------------------

    async def committed_offsets(self, group) -> list[dict]:
        """The group's committed offsets (after `__consumer_offsets` has been replayed)."""
        from ..coordinator import coordinator_of

        if not isinstance(group, str) or not group:
            raise ControlError(400, "a group id is a non-empty string")
        coordinator = coordinator_of(self._broker)
        await coordinator.start()
        committed = coordinator.offsets.fetch(group)
        return [{"topic": entry.topic, "partition": entry.partition, "offset": entry.offset,
                 "leader_epoch": entry.leader_epoch, "metadata": entry.metadata}
                for _, entry in sorted(committed.items())]

    # --- transactions ---------------------------------------------------------------------------------------------

    async def transactions(self, transactional_id=None) -> list[dict]:
        """Every transactional id the transaction coordinator knows (after `__transaction_state` has been
        replayed), or the one named: state, producer id and epoch, timeout, start time and partitions."""
        from ..coordinator.transactions import transactions_of

        if transactional_id is not None and (not isinstance(transactional_id, str) or not transactional_id):
            raise ControlError(400, "a transactional id is a non-empty string")
        coordinator = transactions_of(self._broker)
        await coordinator.start()
        views = coordinator.views()
        if transactional_id is not None:
            views = [view for view in views if view.transactional_id == transactional_id]
        return [_transaction(view) for view in sorted(views)]

    # --- the request log ------------------------------------------------------------------------------------------

    async def requests(self, since=0, api=None) -> list[dict]:
        with _bad_request():
            return [entry.to_dict() for entry in self._injector.requests(_int(since, "since"), api)]

    async def clear_requests(self) -> dict:
        self._injector.clear_requests()
        return {"last_seq": self._injector.last_seq}


def _topic(info) -> dict:
    return {"name": info.name, "partitions": info.partitions, "topic_id": str(info.topic_id),
            "internal": info.is_internal}


def _transaction(view) -> dict:
    return {"transactional_id": view.transactional_id, "state": view.state, "producer_id": view.producer_id,
            "producer_epoch": view.producer_epoch, "transaction_timeout_ms": view.transaction_timeout_ms,
            "transaction_start_time_ms": view.transaction_start_time_ms,
            "partitions": [[topic, partition] for topic, partition in view.partitions]}


def _record(topic: str, partition: int, record) -> dict:
    return {"topic": topic, "partition": partition, "offset": record.offset, "timestamp": record.timestamp,
            "key": _bytes(record.key), "value": _bytes(record.value),
            "headers": [[name, _bytes(value)] for name, value in record.headers]}


def _bytes(value):
    return None if value is None else bytes(value)


def _int(value, what: str, minimum: int = 0) -> int:
    try:
        number = int(value)
    except (TypeError, ValueError):
        raise ControlError(400, f"{what} must be an integer, got {value!r}") from None
    if number < minimum:
        raise ControlError(400, f"{what} must be at least {minimum}, got {number}")
    return number


@contextlib.contextmanager
def _bad_request():
    """Turns the injector's FaultError (a bad API name, error or count) into a 400 answer."""
    try:
        yield
    except FaultError as exc:
        raise ControlError(400, str(exc)) from None

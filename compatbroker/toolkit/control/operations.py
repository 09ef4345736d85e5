"""The control operations: everything a test may ask of a running broker, as coroutines on the broker's loop.

The HTTP endpoint (`http.py`) maps routes onto these methods, and the embedded broker calls them directly from its
thread (`asyncio.run_coroutine_threadsafe`), so both give the same answers. Answers are plain data (dicts, lists,
strings, numbers) except record keys, values and header values, which are bytes here and base64 over HTTP.
A request that cannot be honoured raises `ControlError` with an HTTP status and a one-line reason.

The web console (`console/`) reads through the same object: `overview`, `topic_summaries`, `topic_details`
(partitions with leader, replicas, ISR, log start / end offsets and size; configs), `browse_records` (from an
offset or a time) and `group_lag` (per partition, the lag as Kafka's tools show it for the group's type).

In a cluster (`compatbroker serve --nodes N`) the operations see the whole cluster: records are read from the
partition's leader (any replica while it has none), committed offsets, groups (of every type: classic, consumer,
share) and transactions from the node coordinating them, and the node operations stop, start and isolate nodes,
delay a follower and move leaders.
"""
from __future__ import annotations

import contextlib
import logging
import os
from typing import TYPE_CHECKING

from ... import topic_names
from ...cluster import ControllerError
from ...config import format_host_port
from ...protocol.error_codes import ErrorCode
from ...protocol.records import DEFAULT_MAX_UNCOMPRESSED_SIZE, iter_batches, iter_records
from ...storage import StorageError
from ...storage.log_config import ConfigError
from ..faults import FaultError
from . import ControlError
from . import groups as group_views
from .security import SecurityOperations

if TYPE_CHECKING:
    from ...server.run import ClusterRuntime
    from ..faults import FaultInjector

log = logging.getLogger(__name__)

DEFAULT_RECORD_LIMIT = 1000
BROWSE_MAX_BYTES = 4 << 20  # a page of the console's record browser holds about this much key, value and header data
_READ_CHUNK_BYTES = 1 << 20


class ControlOperations(SecurityOperations):
    """The operations on `runtime`, whose request hooks are `injector` (SCRAM users and ACLs: `security.py`)."""

    def __init__(self, runtime: ClusterRuntime, injector: FaultInjector):
        self._runtime = runtime
        self._injector = injector

    @property
    def _broker(self):
        return self._runtime.broker

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
        """Every node vanishes from the network (the cluster's state is kept; nothing fails over)."""
        for server in self._runtime.servers.values():
            await server.go_down()
        return await self.status()

    async def up(self) -> dict:
        try:
            for server in self._runtime.servers.values():
                server.come_up()
        except OSError as exc:
            raise ControlError(409, f"cannot listen again: {exc}") from None
        return await self.status()

    async def status(self) -> dict:
        runtime = self._runtime
        return {"up": not any(server.is_down for server in runtime.servers.values()),
                "bootstrap_servers": runtime.bootstrap_servers, "node_id": runtime.broker.node_id,
                "node_ids": runtime.node_ids, "cluster_id": runtime.broker.cluster_id,
                "data_dir": runtime.config.data_dir, "pid": os.getpid()}

    # --- nodes of a cluster ---------------------------------------------------------------------------------------

    async def nodes(self) -> list[dict]:
        """Every node: id, rack, address (of its first listener), `listeners` ({name: address}), whether it listens
        (`up`), is alive for the controller and isolated from replication, and how many partitions it leads."""
        runtime = self._runtime
        metadata = runtime.cluster.metadata
        leading: dict[int, int] = {}
        for state in metadata.all_partitions():
            leading[state.leader] = leading.get(state.leader, 0) + 1
        answer = []
        for node_id in runtime.node_ids:
            info = metadata.nodes[node_id]
            answer.append({"node_id": node_id, "rack": info.rack, "address": runtime.address_of(node_id),
                           "listeners": _listener_addresses(runtime.servers[node_id]),
                           "up": runtime.node_is_up(node_id), "alive": info.alive, "isolated": info.isolated,
                           "leader_of": leading.get(node_id, 0)})
        return answer

    async def stop_node(self, node_id) -> dict:
        """Stop a node: leadership fails over, its listeners close and its connections are cut."""
        node_id = self._node_id(node_id)
        await self._runtime.stop_node(node_id)
        return await self._node(node_id)

    async def start_node(self, node_id) -> dict:
        """Start a stopped node again on the same ports."""
        node_id = self._node_id(node_id)
        try:
            self._runtime.start_node(node_id)
        except OSError as exc:
            raise ControlError(409, f"cannot listen again: {exc}") from None
        return await self._node(node_id)

    async def isolate_node(self, node_id, isolated=True) -> dict:
        """Cut a node off from replication (it still serves clients; it falls out of the ISRs), or restore it."""
        node_id = self._node_id(node_id)
        if not isinstance(isolated, bool):
            raise ControlError(400, f"isolated is true or false, got {isolated!r}")
        self._runtime.cluster.isolate_node(node_id, isolated)
        return await self._node(node_id)

    async def delay_follower(self, node_id, ms) -> dict:
        """Make a node copy from its leaders `ms` milliseconds late (0: on time again)."""
        node_id = self._node_id(node_id)
        if isinstance(ms, bool) or not isinstance(ms, (int, float)) or ms < 0:
            raise ControlError(400, f"ms must be a number of at least 0, got {ms!r}")
        self._runtime.cluster.replication.delay_follower(node_id, ms)
        return {"node_id": node_id, "delay_ms": ms}

    async def leader(self, topic, partition=0) -> dict:
        """The partition's leader (-1 while it has none), leader epoch, replicas and ISR."""
        state = self._partition_state(topic, partition)
        return {"topic": state.topic, "partition": state.partition, "leader": state.leader,
                "leader_epoch": state.leader_epoch, "replicas": list(state.replicas), "isr": list(state.isr)}

    async def move_leader(self, topic, partition, node_id) -> dict:
        """Make `node_id` (a live in-sync replica) the partition's leader; its leader epoch goes up by one."""
        state = self._partition_state(topic, partition)
        node_id = self._node_id(node_id)
        try:
            self._runtime.cluster.move_leader(state.topic, state.partition, node_id)
        except ControllerError as exc:
            raise ControlError(409, str(exc)) from None
        return await self.leader(state.topic, state.partition)

    async def restore_nodes(self) -> list[dict]:
        """Undo every node fault: stopped nodes start, isolated ones rejoin, delayed followers copy on time, and
        every node listens (after `down`)."""
        runtime = self._runtime
        for node_id in runtime.node_ids:
            info = runtime.cluster.metadata.nodes[node_id]
            if info.isolated:
                runtime.cluster.isolate_node(node_id, False)
            runtime.cluster.replication.delay_follower(node_id, 0)
            if not info.alive or not runtime.node_is_up(node_id):
                try:
                    runtime.start_node(node_id)
                except OSError as exc:
                    raise ControlError(409, f"node {node_id} cannot listen again: {exc}") from None
        return await self.nodes()

    def _node_id(self, node_id) -> int:
        node_id = whole_number(node_id, "node_id")
        if node_id not in self._runtime.servers:
            raise ControlError(404, f"no node {node_id}; the nodes are {', '.join(map(str, self._runtime.node_ids))}")
        return node_id

    async def _node(self, node_id: int) -> dict:
        return next(node for node in await self.nodes() if node["node_id"] == node_id)

    def _partition_state(self, topic, partition):
        if not isinstance(topic, str) or not topic:
            raise ControlError(400, f"a topic name is a non-empty string, got {topic!r}")
        state = self._runtime.cluster.metadata.partition(topic, whole_number(partition, "partition"))
        if state is None:
            raise ControlError(404, f"no partition {topic}-{partition}")
        return state

    # --- topics and records ---------------------------------------------------------------------------------------

    async def topics(self) -> list[dict]:
        return [_topic(info) for info in sorted(self._broker.topics().values(), key=lambda info: info.name)]

    async def create_topic(self, name, partitions=None, configs=None, replication_factor=None) -> dict:
        """Create a topic (an existing one is returned as it is); `replication_factor` defaults to
        default.replication.factor."""
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
        if replication_factor is not None:
            replication_factor = whole_number(replication_factor, "replication_factor", minimum=1)
        configs = {str(key): str(value) for key, value in (configs or {}).items()}
        try:
            info = broker.create_topic(name, partitions, configs or None, replication_factor=replication_factor)
        except (ConfigError, ControllerError, StorageError, ValueError) as exc:
            raise ControlError(400, f"cannot create topic {name}: {exc}") from None
        return _topic(info)

    async def records(self, topic, partition=0, offset=None, limit=DEFAULT_RECORD_LIMIT, *,
                      max_bytes: int | None = None) -> list[dict]:
        """Stored records of a partition from `offset` (default: the log start), at most `limit` (and, with
        `max_bytes`, no more once their keys, values and headers reach that many bytes); control batches
        (transaction markers) are left out."""
        partition, limit = whole_number(partition, "partition"), whole_number(limit, "limit", minimum=1)
        partition_log = self._replica_log(topic, partition)
        if partition_log is None:
            raise ControlError(404, f"no partition {topic}-{partition}")
        position = partition_log.log_start_offset if offset is None else max(whole_number(offset, "offset"),
                                                                              partition_log.log_start_offset)
        found: list[dict] = []
        room = max_bytes if max_bytes is not None else float("inf")  # key, value and header bytes still wanted
        while position < partition_log.log_end_offset and len(found) < limit and room > 0:
            data = memoryview(partition_log.read_bytes(position, _READ_CHUNK_BYTES))
            next_position = position
            for start, header in iter_batches(data, allow_partial_tail=True):
                next_position = header.next_offset
                if header.is_control:
                    continue
                for record in iter_records(data[start:start + header.size], max_size=DEFAULT_MAX_UNCOMPRESSED_SIZE):
                    if record.offset >= position and len(found) < limit and room > 0:
                        found.append(_record(topic, partition, record))
                        room -= _record_bytes(found[-1])
            if next_position <= position:
                break  # nothing readable here (should not happen): stop rather than spin
            position = next_position
        return found

    async def browse_records(self, topic, partition=0, offset=None, timestamp=None, limit=50,
                             max_bytes=BROWSE_MAX_BYTES) -> dict:
        """Records of a partition from `offset`, or from the first record whose timestamp is at least `timestamp`
        (ms), else from the log start (at most `limit`, fewer once their keys, values and headers reach
        `max_bytes`); with the log start and end offsets, and where the page began."""
        partition = whole_number(partition, "partition")
        replica = self._replica_log(topic, partition)
        if replica is None:
            raise ControlError(404, f"no partition {topic}-{partition}")
        start = replica.log_start_offset
        if offset is not None:
            start = max(whole_number(offset, "offset"), start)
        elif timestamp is not None:
            found = replica.offset_for_timestamp(whole_number(timestamp, "timestamp"))
            start = found.offset if found is not None else replica.high_watermark
        end = replica.high_watermark
        records = [] if start >= end else await self.records(topic, partition, start, limit, max_bytes=max_bytes)
        return {"topic": topic, "partition": partition, "start_offset": start,
                "log_start_offset": replica.log_start_offset, "end_offset": end,
                "records": [record for record in records if record["offset"] < end]}

    def _replica_log(self, topic, partition: int):
        """The leader's replica of a partition; while it has no leader, the first replica a node hosts."""
        nodes = self._runtime.cluster.nodes
        state = self._runtime.cluster.metadata.partition(topic, partition) if isinstance(topic, str) else None
        if state is None:
            return None
        for node_id in [state.leader, *state.replicas]:
            node = nodes.get(node_id)
            replica = node.get_log(topic, partition) if node is not None else None
            if replica is not None:
                return replica
        return None

    # --- what the console shows -----------------------------------------------------------------------------------

    async def overview(self) -> dict:
        """Status and nodes, with counts of topics, partitions and groups and the bytes every replica stores."""
        topics = self._broker.topics().values()
        return {**await self.status(), "nodes": await self.nodes(), "topics": len(topics),
                "partitions": sum(info.partitions for info in topics), "groups": len(await self.groups()),
                "bytes_stored": sum(self._stored_bytes(info) for info in topics)}

    async def topic_summaries(self) -> list[dict]:
        """Every topic with its partition count, size (every replica) and records between log start and end."""
        answer = []
        for summary in await self.topics():
            partitions = self._partition_views(summary["name"], summary["partitions"])
            answer.append({**summary, "size_bytes": sum(view["size_bytes"] for view in partitions),
                           "records": sum(view["end_offset"] - view["log_start_offset"] for view in partitions)})
        return answer

    async def topic_details(self, name, configs=True) -> dict:
        """A topic: its partitions (leader, epoch, replicas, ISR, log start and end offsets, size, segments) and,
        with `configs`, its configs as DescribeConfigs gives them ({name, value, source, default}). 404 for an
        unknown topic."""
        from ...config_catalog import DEFAULT_CONFIG, describe_topic_configs

        info = self._broker.topic(name) if isinstance(name, str) else None
        if info is None:
            raise ControlError(404, f"no topic {name}")
        answer = {**_topic(info), "partition_details": self._partition_views(name, info.partitions)}
        if configs:
            answer["configs"] = [{"name": entry.name, "value": entry.value, "source": entry.source,
                                  "default": entry.source == DEFAULT_CONFIG}
                                 for entry in describe_topic_configs(self._broker, name)]
        return answer

    def _partition_views(self, topic: str, count: int) -> list[dict]:
        views = []
        for partition in range(count):
            state = self._runtime.cluster.metadata.partition(topic, partition)
            replica = self._replica_log(topic, partition)
            views.append({"partition": partition, "leader": state.leader if state else -1,
                          "leader_epoch": state.leader_epoch if state else -1,
                          "replicas": list(state.replicas) if state else [], "isr": list(state.isr) if state else [],
                          "log_start_offset": replica.log_start_offset if replica else 0,
                          "end_offset": replica.high_watermark if replica else 0,
                          "log_end_offset": replica.log_end_offset if replica else 0,
                          "size_bytes": replica.size if replica else 0,
                          "segments": len(replica.segments) if replica else 0})
        return views

    def _stored_bytes(self, info) -> int:
        total = 0
        for node in self._runtime.cluster.nodes.values():
            for partition in range(info.partitions):
                replica = node.get_log(info.name, partition)
                total += replica.size if replica is not None else 0
        return total

    async def group_lag(self, group) -> list[dict]:
        """Per partition the group has an offset for or has assigned: its `offset`, the partition's end offset (high
        watermark) and the `lag` (None where not known), as Kafka's tools show them. For a classic or consumer group
        the offset is the committed one and the lag the end offset minus it (kafka-consumer-groups.sh); for a share
        group the offset is the share-partition start offset and the lag what DescribeShareGroupOffsets v1 answers
        (KIP-1226: records from the start offset to the end not yet delivered for good)."""
        found = await self._group(group)
        share = found is not None and found.group_type == "share"
        if share:
            offsets = {(entry["topic"], entry["partition"]): (entry["start_offset"], entry["lag"]) for entry in
                       await group_views.share_start_offsets(self._runtime.cluster, found, with_lag=True)}
        else:
            offsets = {(entry["topic"], entry["partition"]): (entry["offset"], None)
                       for entry in await self.committed_offsets(group)}
        wanted = set(offsets)
        if found is not None:
            for member in group_views.describe(found, self._topic_name_of)["members"]:
                wanted.update((topic, partition) for topic, partition in member["assignment"])
        answer = []
        for topic, partition in sorted(wanted):
            replica = self._replica_log(topic, partition)
            end = replica.high_watermark if replica is not None else None
            offset, lag = offsets.get((topic, partition), (None, None))
            if not share and end is not None and offset is not None and offset >= 0:
                lag = max(end - offset, 0)
            answer.append({"topic": topic, "partition": partition, "offset": offset, "end_offset": end, "lag": lag})
        return answer

    # --- groups ---------------------------------------------------------------------------------------------------

    async def committed_offsets(self, group=None) -> list[dict]:
        """The group's committed offsets (after `__consumer_offsets` has been replayed), from the node
        coordinating the group; none while no node does. A share group has no committed offsets: its
        share-partition start offsets are answered instead (leader epoch -1, metadata "")."""
        coordinator = await self._coordinator_for(group)
        if coordinator is None:
            return []
        found = coordinator.group(group)
        if found is not None and found.group_type == "share":
            return [{"topic": entry["topic"], "partition": entry["partition"], "offset": entry["start_offset"],
                     "leader_epoch": -1, "metadata": ""}
                    for entry in await group_views.share_start_offsets(self._runtime.cluster, found)]
        committed = coordinator.offsets.fetch(group)
        return [{"topic": entry.topic, "partition": entry.partition, "offset": entry.offset,
                 "leader_epoch": entry.leader_epoch, "metadata": entry.metadata}
                for _, entry in sorted(committed.items())]

    async def groups(self) -> list[dict]:
        """Every group of every type the coordinators know: id, type, state and protocol type, by id."""
        from ...coordinator import coordinator_of

        listed = []
        for node in self._runtime.cluster.nodes.values():
            coordinator = coordinator_of(node)
            await coordinator.start()
            listed += [{"group_id": group.group_id, "type": group.group_type, "state": str(group.state),
                        "protocol_type": group.protocol_type or ""}
                       for group in coordinator.list_groups()]
        return sorted(listed, key=lambda entry: entry["group_id"])

    async def describe_group(self, group=None) -> dict:
        """One group of any type (see `group_views.describe`): state, epoch, members with their assignments; for a
        share group also its share-partition start offsets (`start_offsets`). 404 when no node knows it."""
        found = await self._group(group)
        if found is None:
            raise ControlError(404, f"no group {group}")
        described = group_views.describe(found, self._topic_name_of)
        if found.group_type == "share":
            described["start_offsets"] = await group_views.share_start_offsets(self._runtime.cluster, found)
        return described

    async def _group(self, group):
        """The group `group` of any type from the node coordinating it, or None when no node knows it."""
        coordinator = await self._coordinator_for(group)
        return coordinator.group(group) if coordinator is not None else None

    async def _coordinator_for(self, group):
        """The coordinator of the node coordinating `group` (loaded), or None while no node does."""
        from ...coordinator import coordinator_of

        if not isinstance(group, str) or not group:
            raise ControlError(400, "a group id is a non-empty string")
        for node in self._runtime.cluster.nodes.values():
            candidate = coordinator_of(node)
            await candidate.start()
            if candidate.error_for(group) == ErrorCode.NONE:
                return candidate
        return None

    def _topic_name_of(self, topic_id) -> str:
        info = self._runtime.cluster.metadata.topic_by_id(topic_id)
        return info.name if info is not None else str(topic_id)

    # --- transactions ---------------------------------------------------------------------------------------------

    async def transactions(self, transactional_id=None) -> list[dict]:
        """Every transactional id the transaction coordinator knows (after `__transaction_state` has been
        replayed), or the one named: state, producer id and epoch, timeout, start time and partitions."""
        from ...coordinator.transactions import transactions_of

        if transactional_id is not None and (not isinstance(transactional_id, str) or not transactional_id):
            raise ControlError(400, "a transactional id is a non-empty string")
        views = []
        for node in self._runtime.cluster.nodes.values():  # each node knows the ids of the partitions it leads
            coordinator = transactions_of(node)
            await coordinator.start()
            views += [view for view in coordinator.views()
                      if coordinator.error_for(view.transactional_id) == ErrorCode.NONE]
        if transactional_id is not None:
            views = [view for view in views if view.transactional_id == transactional_id]
        return [_transaction(view) for view in sorted(views)]

    # --- the request log ------------------------------------------------------------------------------------------

    @property
    def recording_requests(self) -> bool:
        return self._injector.record_requests

    async def telemetry_clients(self) -> list[dict] | None:
        """What clients pushed with KIP-714 telemetry, one dict per client, newest push first
        (`compatbroker.telemetry.ClientTelemetry.clients`); None when the runtime keeps no telemetry."""
        telemetry = getattr(self._runtime, "client_telemetry", None)
        return None if telemetry is None else telemetry.clients()

    async def requests(self, since=0, api=None) -> list[dict]:
        with _bad_request():
            return [entry.to_dict() for entry in self._injector.requests(whole_number(since, "since"), api)]

    async def recent_requests(self, limit=200, api=None) -> list[dict]:
        """The newest `limit` logged requests, of `api` when given, newest first (the console's live log)."""
        with _bad_request():
            return [entry.to_dict() for entry in self._injector.recent_requests(whole_number(limit, "limit", 1), api)]

    async def clear_requests(self) -> dict:
        self._injector.clear_requests()
        return {"last_seq": self._injector.last_seq}


def _listener_addresses(server) -> dict[str, str]:
    """{listener name: host:port a client on this machine dials} of a node's bound listeners."""
    addresses = {}
    for bound in server.listeners:
        host = bound.endpoint.host
        if bound.endpoint.is_wildcard or host == "localhost":
            host = "127.0.0.1"
        addresses[bound.endpoint.name] = format_host_port(host, bound.port)
    return addresses


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


def _record_bytes(record: dict) -> int:
    """The bytes a record's key, value and headers take (what a page of the record browser holds)."""
    headers = sum(len(name) + len(value or b"") for name, value in record["headers"])
    return len(record["key"] or b"") + len(record["value"] or b"") + headers


def _bytes(value):
    return None if value is None else bytes(value)


def whole_number(value, what: str, minimum: int = 0) -> int:
    """`value` (a number, or its text from a query or form) as an int of at least `minimum`; else a 400."""
    try:
        number = int(value)
    except (TypeError, ValueError):
        raise ControlError(400, f"{what} must be a whole number, got {value!r}") from None
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

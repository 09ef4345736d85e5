"""Admin operations over `KafkaClient`, as Kafka's admin client performs them: topics, partitions, configs, offsets,
cluster, groups, ACLs and SCRAM users, each request routed where Kafka's admin client sends it (topic changes and
SCRAM changes to the controller, group operations to the group's coordinator, ListOffsets to partition leaders,
broker configs of one broker to that broker, the rest to any broker) at the newest version both sides accept.

Results are dataclasses; `to_json()` gives plain dicts whose keys are the dataclass's field names (stable: the CLI's
`--format json` prints them), KafkaError values as {"code", "name", "message"}, nested results likewise.

Errors: an error that concerns the whole call (the broker refused the request, a group-level error, a config
resource's error) raises `KafkaError`. Calls covering several items (create_topics, delete_topics,
create_partitions, commit_offsets, alter_share_group_offsets, delete_groups, delete_offsets, create_acls,
delete_acls, alter_scram_users, list_offsets, committed_offsets, describe_share_group_offsets) never raise for one
item: every item's result carries `error` (a KafkaError or None), so that a caller sees every outcome;
`raise_for_errors(results)` raises the first one with all of them in `KafkaError.items`. Bad names (a config
operation, an ACL operation, a SCRAM mechanism) raise ValueError before anything is sent.

Where versions differ in shape, each is handled: older request forms where a field is missing (DeleteTopics by
name before v6, OffsetFetch for one group before v8, FindCoordinator one key at a time before v4, ListOffsets v0),
topic ids where newer versions need them (OffsetFetch/OffsetCommit v10), and fallbacks for missing APIs
(AlterConfigs built from the current overrides without IncrementalAlterConfigs, Metadata without DescribeCluster,
DescribeGroups for groups ConsumerGroupDescribe does not know, as Kafka's admin client falls back).
"""
from __future__ import annotations

import dataclasses
import secrets
import uuid
from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from compatbroker.protocol.error_codes import ErrorCode
from compatbroker.protocol.messages.alter_configs import AlterConfigsRequest
from compatbroker.protocol.messages.alter_share_group_offsets import AlterShareGroupOffsetsRequest
from compatbroker.protocol.messages.alter_user_scram_credentials import AlterUserScramCredentialsRequest
from compatbroker.protocol.messages.consumer_group_describe import ConsumerGroupDescribeRequest
from compatbroker.protocol.messages.consumer_protocol_assignment import ConsumerProtocolAssignment
from compatbroker.protocol.messages.consumer_protocol_subscription import ConsumerProtocolSubscription
from compatbroker.protocol.messages.create_acls import CreateAclsRequest
from compatbroker.protocol.messages.create_partitions import CreatePartitionsRequest
from compatbroker.protocol.messages.create_topics import CreateTopicsRequest
from compatbroker.protocol.messages.delete_acls import DeleteAclsRequest
from compatbroker.protocol.messages.delete_groups import DeleteGroupsRequest
from compatbroker.protocol.messages.delete_topics import DeleteTopicsRequest
from compatbroker.protocol.messages.describe_acls import DescribeAclsRequest
from compatbroker.protocol.messages.describe_cluster import DescribeClusterRequest
from compatbroker.protocol.messages.describe_configs import DescribeConfigsRequest
from compatbroker.protocol.messages.describe_groups import DescribeGroupsRequest
from compatbroker.protocol.messages.describe_share_group_offsets import DescribeShareGroupOffsetsRequest
from compatbroker.protocol.messages.describe_user_scram_credentials import DescribeUserScramCredentialsRequest
from compatbroker.protocol.messages.incremental_alter_configs import IncrementalAlterConfigsRequest
from compatbroker.protocol.messages.list_groups import ListGroupsRequest
from compatbroker.protocol.messages.list_offsets import ListOffsetsRequest
from compatbroker.protocol.messages.offset_commit import OffsetCommitRequest
from compatbroker.protocol.messages.offset_delete import OffsetDeleteRequest
from compatbroker.protocol.messages.offset_fetch import OffsetFetchRequest
from compatbroker.protocol.messages.share_group_describe import ShareGroupDescribeRequest

from .client import BrokerMetadata, KafkaClient
from .errors import KafkaConnectionError, KafkaError, KafkaTimeoutError, error_or_none
from .consumer_protocol import read_consumer_protocol
from .sasl import SCRAM_MIN_ITERATIONS, salted_password

# API keys
LIST_OFFSETS, OFFSET_COMMIT, OFFSET_FETCH, DESCRIBE_GROUPS, LIST_GROUPS = 2, 8, 9, 15, 16
CREATE_TOPICS, DELETE_TOPICS, DESCRIBE_CONFIGS, ALTER_CONFIGS = 19, 20, 32, 33
INCREMENTAL_ALTER_CONFIGS, DESCRIBE_CLUSTER = 44, 60
CONSUMER_GROUP_DESCRIBE, SHARE_GROUP_DESCRIBE = 69, 77
DESCRIBE_SHARE_GROUP_OFFSETS, ALTER_SHARE_GROUP_OFFSETS = 90, 91
DESCRIBE_ACLS, CREATE_ACLS, DELETE_ACLS = 29, 30, 31

# OffsetFetch and OffsetCommit name topics by id from v10 (Kafka 4.1); up to v9 by name
BY_NAME_MAX_VERSION = 9

# ConfigResource types and ConfigEntry sources, by Kafka's names (the admin client's, as kafka-configs.sh prints)
RESOURCE_TYPES = {"TOPIC": 2, "BROKER": 4, "BROKER_LOGGER": 8, "CLIENT_METRICS": 16, "GROUP": 32}
CONFIG_SOURCES = {0: "UNKNOWN", 1: "DYNAMIC_TOPIC_CONFIG", 2: "DYNAMIC_BROKER_CONFIG",
                  3: "DYNAMIC_DEFAULT_BROKER_CONFIG", 4: "STATIC_BROKER_CONFIG", 5: "DEFAULT_CONFIG",
                  6: "DYNAMIC_BROKER_LOGGER_CONFIG", 7: "DYNAMIC_CLIENT_METRICS_CONFIG", 8: "DYNAMIC_GROUP_CONFIG"}
CONFIG_TYPES = ("UNKNOWN", "BOOLEAN", "STRING", "INT", "SHORT", "LONG", "DOUBLE", "LIST", "CLASS", "PASSWORD")
ALTER_OPS = {"SET": 0, "DELETE": 1, "APPEND": 2, "SUBTRACT": 3}
# the source an override of each resource type has (for the AlterConfigs fallback)
_OVERRIDE_SOURCE = {2: 1, 8: 6, 16: 7, 32: 8}

# ListOffsets special timestamps
OFFSET_SPECS = {"latest": -1, "earliest": -2, "max-timestamp": -3}

# ACL enums, by Kafka's names
ACL_RESOURCE_TYPES = ("UNKNOWN", "ANY", "TOPIC", "GROUP", "CLUSTER", "TRANSACTIONAL_ID", "DELEGATION_TOKEN", "USER")
ACL_PATTERN_TYPES = ("UNKNOWN", "ANY", "MATCH", "LITERAL", "PREFIXED")
ACL_OPERATIONS = ("UNKNOWN", "ANY", "ALL", "READ", "WRITE", "CREATE", "DELETE", "ALTER", "DESCRIBE", "CLUSTER_ACTION",
                  "DESCRIBE_CONFIGS", "ALTER_CONFIGS", "IDEMPOTENT_WRITE", "CREATE_TOKENS", "DESCRIBE_TOKENS",
                  "TWO_PHASE_COMMIT")
ACL_PERMISSIONS = ("UNKNOWN", "ANY", "DENY", "ALLOW")

SCRAM_MECHANISMS = {"SCRAM-SHA-256": 1, "SCRAM-SHA-512": 2}
DEFAULT_SCRAM_ITERATIONS = 4096


# --- results ------------------------------------------------------------------------------------------------------

def _json(value):
    if isinstance(value, KafkaError):
        return value.to_json()
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: _json(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, (list, tuple)):
        return [_json(item) for item in value]
    if isinstance(value, dict):
        return {str(key): _json(item) for key, item in value.items()}
    if isinstance(value, (bytes, bytearray, memoryview)):
        return bytes(value).hex()
    return value


class _Result:
    def to_json(self) -> dict:
        """The fields as plain JSON values; keys are the field names."""
        return _json(self)


def raise_for_errors(results: Iterable, key=None) -> None:
    """Raises the first item error of `results` (objects with `.error`), with every item's outcome in
    `KafkaError.items` ({key(result): KafkaError | None}; by default keyed by the topic, group, user or
    "topic-partition" the result is about); returns when none failed."""
    key = key or _item_key
    results = list(results)
    failed = [r for r in results if r.error is not None]
    if failed:
        first = failed[0].error
        raise KafkaError(first.code, f"{len(failed)} of {len(results)} failed; first: {key(failed[0])}: "
                                     f"{first.message}", items={key(r): r.error for r in results})


def _item_key(result) -> str:
    for name in ("name", "group_id", "user"):
        if hasattr(result, name):
            return getattr(result, name)
    if hasattr(result, "partition"):
        return f"{result.topic}-{result.partition}"
    return repr(getattr(result, "binding", getattr(result, "filter", result)))


@dataclass
class NewTopic(_Result):
    """A topic to create. partitions / replication_factor -1: the broker's defaults (needs CreateTopics v4+);
    `assignments` {partition: [broker ids]} replaces both."""
    name: str
    partitions: int = -1
    replication_factor: int = -1
    configs: dict[str, str] = field(default_factory=dict)
    assignments: dict[int, list[int]] | None = None


@dataclass
class TopicResult(_Result):
    """Outcome of creating, deleting or growing one topic (topic_id, partitions, replication_factor as the broker
    reported them, when its version reports them; else None / -1)."""
    name: str
    error: KafkaError | None = None
    topic_id: str | None = None
    partitions: int = -1
    replication_factor: int = -1


@dataclass
class TopicListing(_Result):
    name: str
    topic_id: str | None
    internal: bool
    partitions: int
    replication_factor: int


@dataclass
class ConfigSynonym(_Result):
    name: str
    value: str | None
    source: str


@dataclass
class ConfigEntry(_Result):
    """One config of a resource. `source` is Kafka's ConfigEntry.ConfigSource name (DYNAMIC_TOPIC_CONFIG,
    DEFAULT_CONFIG, ...); `value` is None for sensitive or unset configs; `type` a ConfigType name (UNKNOWN before
    DescribeConfigs v3)."""
    name: str
    value: str | None
    source: str
    read_only: bool
    sensitive: bool
    default: bool
    synonyms: list[ConfigSynonym] = field(default_factory=list)
    type: str = "UNKNOWN"
    documentation: str | None = None


@dataclass
class OffsetResult(_Result):
    """ListOffsets answer for one partition (offset -1 when no record matches; timestamp -1 when not reported)."""
    topic: str
    partition: int
    offset: int = -1
    timestamp: int = -1
    leader_epoch: int = -1
    error: KafkaError | None = None


@dataclass
class ClusterInfo(_Result):
    """cluster_id, controller_id, brokers (sorted by id), finalized_features {name: {"min", "max"}} and
    supported_features as ApiVersions gave them, and which API `source` described the cluster."""
    cluster_id: str | None
    controller_id: int
    brokers: list[BrokerMetadata]
    finalized_features: dict[str, dict[str, int]] = field(default_factory=dict)
    supported_features: dict[str, dict[str, int]] = field(default_factory=dict)
    source: str = "DescribeCluster"


@dataclass
class GroupListing(_Result):
    """state None when the broker's ListGroups version has no states (< v4); type "classic" before v5."""
    group_id: str
    protocol_type: str
    state: str | None
    type: str
    coordinator: int = -1


@dataclass
class TopicPartition(_Result):
    topic: str
    partition: int


@dataclass
class MemberDescription(_Result):
    """A group member. `assignment`: partitions it owns (classic consumer groups: decoded from its
    ConsumerProtocolAssignment; None when the bytes cannot be read), `target_assignment` for consumer groups;
    `subscribed_topics` from its subscription."""
    member_id: str
    client_id: str
    client_host: str
    instance_id: str | None = None
    rack: str | None = None
    member_epoch: int = -1
    assignment: list[TopicPartition] | None = field(default_factory=list)
    target_assignment: list[TopicPartition] | None = None
    subscribed_topics: list[str] = field(default_factory=list)
    subscribed_regex: str | None = None


@dataclass
class GroupDescription(_Result):
    """A group of any type ("classic", "consumer", "share"). `protocol` is the classic group's chosen protocol
    (the assignor for consumers), `assignor` the consumer/share group's server-side assignor."""
    group_id: str
    type: str
    state: str
    coordinator: int
    protocol_type: str = ""
    protocol: str = ""
    assignor: str = ""
    group_epoch: int = -1
    assignment_epoch: int = -1
    members: list[MemberDescription] = field(default_factory=list)
    error: KafkaError | None = None


@dataclass
class CommittedOffset(_Result):
    topic: str
    partition: int
    offset: int
    leader_epoch: int = -1
    metadata: str | None = None
    error: KafkaError | None = None


@dataclass
class ShareGroupOffset(_Result):
    """A share-partition's start offset (-1 when the group has no state for it) and, from brokers that report it
    (DescribeShareGroupOffsets v1+, KIP-1226), its lag: records at or after the start offset not yet delivered for
    good (-1 when not known)."""
    topic: str
    partition: int
    start_offset: int
    leader_epoch: int = -1
    lag: int = -1
    error: KafkaError | None = None


@dataclass
class PartitionResult(_Result):
    topic: str
    partition: int
    error: KafkaError | None = None


@dataclass
class GroupResult(_Result):
    group_id: str
    error: KafkaError | None = None


@dataclass
class AclBinding(_Result):
    """An ACL, by Kafka's names: resource_type TOPIC|GROUP|CLUSTER|TRANSACTIONAL_ID|DELEGATION_TOKEN|USER,
    pattern_type LITERAL|PREFIXED, principal "User:alice", host "*", operation READ|WRITE|..., permission
    ALLOW|DENY."""
    resource_type: str
    resource_name: str
    principal: str
    operation: str
    permission: str = "ALLOW"
    pattern_type: str = "LITERAL"
    host: str = "*"


@dataclass
class AclFilter(_Result):
    """Matches ACLs: None (or "ANY") matches everything in that field; pattern_type also MATCH (every pattern
    that matches the name)."""
    resource_type: str = "ANY"
    resource_name: str | None = None
    principal: str | None = None
    operation: str = "ANY"
    permission: str = "ANY"
    pattern_type: str = "ANY"
    host: str | None = None


@dataclass
class AclResult(_Result):
    binding: AclBinding
    error: KafkaError | None = None


@dataclass
class DeleteAclsResult(_Result):
    """One filter's outcome: `error` for the filter, `deleted` the bindings it matched, each with its error."""
    filter: AclFilter
    error: KafkaError | None = None
    deleted: list[AclResult] = field(default_factory=list)


@dataclass
class ScramCredential(_Result):
    mechanism: str
    iterations: int


@dataclass
class ScramUser(_Result):
    user: str
    credentials: list[ScramCredential] = field(default_factory=list)
    error: KafkaError | None = None


@dataclass
class ScramUpsertion(_Result):
    """A SCRAM credential to set: salted client-side as Kafka's admin client does (random salt, PBKDF2)."""
    user: str
    mechanism: str
    password: str
    iterations: int = DEFAULT_SCRAM_ITERATIONS


@dataclass
class UserResult(_Result):
    user: str
    error: KafkaError | None = None


# --- the admin client ---------------------------------------------------------------------------------------------

class Admin:
    """Admin operations on the cluster `client` talks to (see the module docstring)."""

    def __init__(self, client: KafkaClient):
        self.client = client

    def _controller(self) -> int | None:
        controller = self.client.metadata([]).controller_id
        return controller if controller >= 0 else None

    def _timeout_ms(self) -> int:
        return int(self.client.config.request_timeout_s * 1000)

    # --- topics -------------------------------------------------------------------------------------------------

    def list_topics(self, internal: bool = False) -> list[TopicListing]:
        """Every topic (internal ones such as __consumer_offsets only with `internal`), sorted by name."""
        listings = []
        for topic in self.client.metadata(None).topics.values():
            if topic.error or (topic.internal and not internal):
                continue
            replicas = max((len(p.replicas) for p in topic.partitions.values()), default=0)
            listings.append(TopicListing(topic.name, topic.topic_id, topic.internal, len(topic.partitions), replicas))
        return sorted(listings, key=lambda listing: listing.name)

    def describe_topics(self, names: list[str]):
        """{name: TopicMetadata} of the given topics; a missing one carries its error (not raised)."""
        return {name: topic for name, topic in self.client.metadata(list(names)).topics.items()}

    def create_topics(self, topics: list[NewTopic], validate_only: bool = False) -> list[TopicResult]:
        """Creates topics (CreateTopics to the controller); one TopicResult per topic, in request order."""
        def build(version):
            creatable = []
            for topic in topics:
                assignments = [CreateTopicsRequest.CreatableReplicaAssignment(partition_index=p, broker_ids=list(b))
                               for p, b in sorted((topic.assignments or {}).items())]
                configs = [CreateTopicsRequest.CreatableTopicConfig(name=k, value=str(v))
                           for k, v in topic.configs.items()]
                creatable.append(CreateTopicsRequest.CreatableTopic(
                    name=topic.name, num_partitions=-1 if assignments else topic.partitions,
                    replication_factor=-1 if assignments else topic.replication_factor,
                    assignments=assignments, configs=configs))
            return CreateTopicsRequest(topics=creatable, timeout_ms=self._timeout_ms(), validate_only=validate_only)
        needs_defaults = any(t.assignments is None and (t.partitions < 0 or t.replication_factor < 0)
                             for t in topics)
        version, response = self.client.call(build, self._controller(), api_key=CREATE_TOPICS,
                                             min_version=4 if needs_defaults else (1 if validate_only else 0))
        answers = {r.name: r for r in response.topics}
        results = []
        for topic in topics:
            answer = answers.get(topic.name)
            if answer is None:
                results.append(TopicResult(topic.name, KafkaError(ErrorCode.UNKNOWN_SERVER_ERROR,
                                                                  "the broker gave no result for this topic")))
                continue
            results.append(TopicResult(answer.name, error_or_none(answer.error_code, answer.error_message),
                                       str(answer.topic_id) if version >= 7 and not answer.error_code else None,
                                       answer.num_partitions if version >= 5 else -1,
                                       answer.replication_factor if version >= 5 else -1))
        return results

    def delete_topics(self, names: list[str]) -> list[TopicResult]:
        """Deletes topics by name (DeleteTopics to the controller); one TopicResult per name."""
        def build(version):
            if version >= 6:
                return DeleteTopicsRequest(topics=[DeleteTopicsRequest.DeleteTopicState(name=n) for n in names],
                                           timeout_ms=self._timeout_ms())
            return DeleteTopicsRequest(topic_names=list(names), timeout_ms=self._timeout_ms())
        response = self.client.send(build, self._controller(), api_key=DELETE_TOPICS)
        answers = {r.name: r for r in response.responses}
        return [TopicResult(name, error_or_none(answers[name].error_code, answers[name].error_message)
                            if name in answers else KafkaError(ErrorCode.UNKNOWN_SERVER_ERROR, "no result given"))
                for name in names]

    def create_partitions(self, counts: Mapping[str, int], validate_only: bool = False) -> list[TopicResult]:
        """Grows topics to `counts` {topic: new total partition count}; one TopicResult per topic."""
        topics = [CreatePartitionsRequest.CreatePartitionsTopic(name=name, count=count, assignments=None)
                  for name, count in counts.items()]
        response = self.client.send(CreatePartitionsRequest(topics=topics, timeout_ms=self._timeout_ms(),
                                                            validate_only=validate_only), self._controller())
        answers = {r.name: r for r in response.results}
        return [TopicResult(name, error_or_none(answers[name].error_code, answers[name].error_message)
                            if name in answers else KafkaError(ErrorCode.UNKNOWN_SERVER_ERROR, "no result given"),
                            partitions=count)
                for name, count in counts.items()]

    # --- configs ------------------------------------------------------------------------------------------------

    def _config_node(self, resource_type: int, name: str) -> int | None:
        # a broker's own configs (and its loggers) are described and altered on that broker
        if resource_type in (4, 8) and name.strip():
            return int(name)
        return None

    def describe_configs(self, resource_type, name: str, names: list[str] | None = None, *,
                         synonyms: bool = True, documentation: bool = False) -> list[ConfigEntry]:
        """The configs of one resource (type: TOPIC, BROKER, BROKER_LOGGER, CLIENT_METRICS, GROUP or its code;
        name: topic, broker id, "" for the broker cluster default, ...), sorted by name; `names` picks keys.
        Raises the resource's error."""
        rtype = resource_type_code(resource_type)

        def build(version):
            resource = DescribeConfigsRequest.DescribeConfigsResource(
                resource_type=rtype, resource_name=name, configuration_keys=list(names) if names else None)
            return DescribeConfigsRequest(resources=[resource], include_synonyms=synonyms and version >= 1,
                                          include_documentation=documentation and version >= 3)
        version, response = self.client.call(build, self._config_node(rtype, name), api_key=DESCRIBE_CONFIGS)
        result = response.results[0] if response.results else None
        if result is None:
            raise KafkaError(ErrorCode.UNKNOWN_SERVER_ERROR, f"no result for config resource {name!r}")
        if result.error_code:
            raise KafkaError(result.error_code, result.error_message)
        return sorted((_config_entry(entry, version, rtype) for entry in result.configs), key=lambda e: e.name)

    def incremental_alter_configs(self, resource_type, name: str, changes: list[tuple[str, str | int, str | None]],
                                  validate_only: bool = False) -> None:
        """Applies [(key, op, value)] to one resource, op SET|DELETE|APPEND|SUBTRACT (or 0-3). Brokers without
        IncrementalAlterConfigs get an AlterConfigs built from the current overrides. Raises the resource's
        error."""
        rtype = resource_type_code(resource_type)
        ops = [(key, alter_op_code(op), None if value is None else str(value)) for key, op, value in changes]
        node = self._config_node(rtype, name)
        if not self.client.supports(INCREMENTAL_ALTER_CONFIGS, node):
            return self._alter_configs_fallback(rtype, name, ops, validate_only, node)
        configs = [IncrementalAlterConfigsRequest.AlterableConfig(name=k, config_operation=op, value=v)
                   for k, op, v in ops]
        resource = IncrementalAlterConfigsRequest.AlterConfigsResource(resource_type=rtype, resource_name=name,
                                                                       configs=configs)
        response = self.client.send(IncrementalAlterConfigsRequest(resources=[resource], validate_only=validate_only),
                                    node)
        for answer in response.responses:
            if answer.error_code:
                raise KafkaError(answer.error_code, answer.error_message)
        return None

    def _alter_configs_fallback(self, rtype: int, name: str, ops, validate_only: bool, node) -> None:
        # AlterConfigs replaces every override: send the current ones with the changes applied
        source = CONFIG_SOURCES[_OVERRIDE_SOURCE.get(rtype, 2 if name.strip() else 3)]
        overrides = [e for e in self.describe_configs(rtype, name, synonyms=False) if e.source == source]
        hidden = sorted(e.name for e in overrides if e.sensitive and e.name not in {key for key, _op, _v in ops})
        if hidden:
            raise KafkaError(ErrorCode.UNSUPPORTED_VERSION, f"the broker lacks IncrementalAlterConfigs, and "
                             f"AlterConfigs would drop the secret override(s) {', '.join(hidden)} it does not reveal")
        current = {e.name: e.value for e in overrides if not e.sensitive}
        for key, op, value in ops:
            items = [i for i in (current.get(key) or "").split(",") if i]
            if op == 0:
                current[key] = value
            elif op == 1:
                current.pop(key, None)
            elif op == 2:
                current[key] = ",".join(items + [v for v in (value or "").split(",") if v and v not in items])
            else:
                current[key] = ",".join(i for i in items if i not in (value or "").split(","))
        configs = [AlterConfigsRequest.AlterableConfig(name=k, value=v) for k, v in current.items()]
        resource = AlterConfigsRequest.AlterConfigsResource(resource_type=rtype, resource_name=name, configs=configs)
        response = self.client.send(AlterConfigsRequest(resources=[resource], validate_only=validate_only), node)
        for answer in response.responses:
            if answer.error_code:
                raise KafkaError(answer.error_code, answer.error_message)

    # --- offsets ------------------------------------------------------------------------------------------------

    def list_offsets(self, topic: str, partitions: list[int] | None = None, spec: str | int = "latest", *,
                     read_committed: bool = False) -> list[OffsetResult]:
        """The offset of `spec` ("earliest", "latest", "max-timestamp", or a timestamp in ms: the first offset
        whose timestamp is at or after it) for each partition (None: all), asking each partition's leader; a
        partition whose leader moved is asked again once after a metadata refresh."""
        timestamp = _offset_spec(spec)
        if partitions is None:
            partitions = sorted(self.client.topic(topic).partitions)
        results = {p: OffsetResult(topic, p) for p in partitions}
        pending, refresh = list(partitions), False
        for _attempt in range(2):
            retry = []
            for node, group in self._by_leader(topic, pending, results, refresh).items():
                for result in self._list_offsets_at(node, topic, group, timestamp, read_committed):
                    results[result.partition] = result
                    if result.error and result.error.code in _STALE_LEADER:
                        retry.append(result.partition)
            if not retry:
                break
            pending, refresh = retry, True
        return [results[p] for p in partitions]

    def _by_leader(self, topic, partitions, results, refresh) -> dict[int, list[int]]:
        groups = defaultdict(list)
        for partition in partitions:
            try:
                groups[self.client.leader(topic, partition, refresh=refresh)].append(partition)
                refresh = False
            except KafkaError as exc:
                results[partition] = OffsetResult(topic, partition, error=exc)
        return groups

    def _list_offsets_at(self, node, topic, partitions, timestamp, read_committed) -> list[OffsetResult]:
        def build(version):
            if version == 0:
                entries = [ListOffsetsRequest.ListOffsetsPartition(partition_index=p, timestamp=timestamp,
                                                                    max_num_offsets=1) for p in partitions]
            else:
                entries = [ListOffsetsRequest.ListOffsetsPartition(partition_index=p, timestamp=timestamp)
                           for p in partitions]
            return ListOffsetsRequest(replica_id=-1, isolation_level=1 if read_committed and version >= 2 else 0,
                                      topics=[ListOffsetsRequest.ListOffsetsTopic(name=topic, partitions=entries)])
        min_version = 7 if timestamp == -3 else (2 if read_committed else 0)
        try:
            version, response = self.client.call(build, node, api_key=LIST_OFFSETS, min_version=min_version)
        except (KafkaConnectionError, KafkaTimeoutError) as exc:
            return [OffsetResult(topic, p, error=exc) for p in partitions]    # this leader only: asked again
        results = []
        for answer in (p for t in response.topics for p in t.partitions):
            if version == 0:
                offset = answer.old_style_offsets[0] if answer.old_style_offsets else -1
                results.append(OffsetResult(topic, answer.partition_index, offset, -1, -1,
                                            error_or_none(answer.error_code)))
            else:
                results.append(OffsetResult(topic, answer.partition_index, answer.offset, answer.timestamp,
                                            answer.leader_epoch, error_or_none(answer.error_code)))
        return results

    # --- cluster ------------------------------------------------------------------------------------------------

    def cluster_info(self) -> ClusterInfo:
        """The cluster id, controller and brokers (with racks) from DescribeCluster, or Metadata on brokers
        without it; the finalized and supported features of the ApiVersions answer (v3+)."""
        versions = self.client.api_versions()
        if self.client.supports(DESCRIBE_CLUSTER):
            response = self.client.send(DescribeClusterRequest(include_cluster_authorized_operations=False))
            if response.error_code:
                raise KafkaError(response.error_code, response.error_message)
            brokers = [BrokerMetadata(b.broker_id, b.host, b.port, b.rack) for b in response.brokers]
            cluster_id, controller, source = response.cluster_id, response.controller_id, "DescribeCluster"
        else:
            metadata = self.client.metadata([])
            brokers = list(metadata.brokers.values())
            cluster_id, controller, source = metadata.cluster_id, metadata.controller_id, "Metadata"
        finalized = {f.name: {"min": f.min_version_level, "max": f.max_version_level}
                     for f in versions.finalized_features}
        supported = {f.name: {"min": f.min_version, "max": f.max_version} for f in versions.supported_features}
        return ClusterInfo(cluster_id, controller, sorted(brokers, key=lambda b: b.node_id), finalized, supported,
                           source)

    # --- groups -------------------------------------------------------------------------------------------------

    def list_groups(self, types: list[str] | None = None, states: list[str] | None = None) -> list[GroupListing]:
        """Groups of every broker (ListGroups to each), sorted by id. `types` ("classic", "consumer", "share")
        and `states` ("Stable", "Empty", ...) filter on the broker when its version allows (types v5+, states
        v4+); states against an older broker raise UNSUPPORTED_VERSION, types are then applied here (every
        group of such a broker is classic)."""
        listings = {}
        for node_id in sorted(self.client.brokers):
            for listing in self._list_groups_at(node_id, types, states):
                listings[listing.group_id] = listing
        return [listings[g] for g in sorted(listings)]

    def _list_groups_at(self, node_id, types, states) -> list[GroupListing]:
        def build(version):
            return ListGroupsRequest(states_filter=list(states or []) if version >= 4 else [],
                                     types_filter=list(types or []) if version >= 5 else [])
        version, response = self.client.call(build, node_id, api_key=LIST_GROUPS, min_version=4 if states else 0)
        if response.error_code:
            raise KafkaError(response.error_code, f"ListGroups refused by node {node_id}")
        wanted_types = {t.lower() for t in types or []}
        listings = []
        for group in response.groups:
            group_type = group.group_type if version >= 5 and group.group_type else "classic"
            if wanted_types and group_type.lower() not in wanted_types:
                continue
            listings.append(GroupListing(group.group_id, group.protocol_type,
                                         group.group_state if version >= 4 else None, group_type, node_id))
        return listings

    def describe_groups(self, group_ids: list[str]) -> list[GroupDescription]:
        """Describes groups of any type, in the order given: ConsumerGroupDescribe first where the broker has it,
        then DescribeGroups (classic groups, member assignments decoded), then ShareGroupDescribe for ids still
        not found. A group that does not exist comes back with state "Dead" and error GROUP_ID_NOT_FOUND."""
        found: dict[str, GroupDescription] = {}
        coordinators = self.client.coordinators(list(group_ids))
        by_node = defaultdict(list)
        for group_id in group_ids:
            node = coordinators[group_id]
            if isinstance(node, KafkaError):
                found[group_id] = GroupDescription(group_id, "unknown", "Unknown", -1, error=node)
            else:
                by_node[node].append(group_id)
        for node, ids in by_node.items():
            found.update(self._describe_at(node, ids))
        return [found[g] for g in dict.fromkeys(group_ids)]

    def _describe_at(self, node: int, ids: list[str]) -> dict[str, GroupDescription]:
        # as Kafka's admin client: a group the newer API does not know (GROUP_ID_NOT_FOUND) may be of another type
        results: dict[str, GroupDescription] = {}
        pending = list(ids)
        for describe in (self._describe_consumer_groups, self._describe_classic_groups, self._describe_share_groups):
            if pending:
                results.update((d.group_id, d) for d in describe(node, pending) if d.group_id in pending)
                pending = [g for g in pending if g not in results or _not_found(results[g])]
        for group_id in pending:
            results[group_id] = GroupDescription(group_id, "unknown", "Dead", node, error=KafkaError(
                ErrorCode.GROUP_ID_NOT_FOUND, f"group {group_id} does not exist"))
        return results

    def _describe_consumer_groups(self, node, ids) -> list[GroupDescription]:
        if not self.client.supports(CONSUMER_GROUP_DESCRIBE, node):
            return []
        response = self.client.send(ConsumerGroupDescribeRequest(group_ids=list(ids)), node)
        return [_modern_group(g, "consumer", node) for g in response.groups]

    def _describe_share_groups(self, node, ids) -> list[GroupDescription]:
        if not self.client.supports(SHARE_GROUP_DESCRIBE, node):
            return []
        response = self.client.send(ShareGroupDescribeRequest(group_ids=list(ids)), node)
        return [_modern_group(g, "share", node) for g in response.groups]

    def _describe_classic_groups(self, node, ids) -> list[GroupDescription]:
        response = self.client.send(DescribeGroupsRequest(groups=list(ids)), node)
        descriptions = []
        for group in response.groups:
            error = error_or_none(group.error_code, getattr(group, "error_message", None))
            if error is None and group.group_state == "Dead":
                error = KafkaError(ErrorCode.GROUP_ID_NOT_FOUND, f"group {group.group_id} does not exist")
            members = [_classic_member(m, group.protocol_type) for m in group.members]
            descriptions.append(GroupDescription(group.group_id, "classic", group.group_state, node,
                                                 group.protocol_type, group.protocol_data, members=members,
                                                 error=error))
        return descriptions

    def committed_offsets(self, group_id: str, topics: list[str] | None = None, *,
                          require_stable: bool = False) -> list[CommittedOffset]:
        """The group's committed offsets (OffsetFetch to its coordinator), sorted by topic and partition: of every
        partition it committed (topics None), or of every partition of `topics` (offset -1 where none).
        Raises group-level errors (GROUP_ID_NOT_FOUND, GROUP_AUTHORIZATION_FAILED, ...)."""
        node = self.client.coordinator(group_id)
        every_committed = topics is None
        if every_committed and self.client.version_for(OFFSET_FETCH, node) < 2:
            # before v2 no "every partition" form: ask for every partition of every topic, keep those committed
            topics = [t.name for t in self.client.metadata(None).topics.values() if not t.error]
        partitions, ids = None, {}
        if topics is not None:
            described = {t: self.client.topic(t) for t in topics}
            partitions = {t: sorted(d.partitions) for t, d in described.items()}
            ids = {t: d.topic_id for t, d in described.items()}

        def build(version):
            if version >= 8:
                wanted = None if partitions is None else [
                    OffsetFetchRequest.OffsetFetchRequestTopics(partition_indexes=ps, **_topic_key(t, ids, version))
                    for t, ps in partitions.items()]
                group = OffsetFetchRequest.OffsetFetchRequestGroup(group_id=group_id, topics=wanted)
                return OffsetFetchRequest(groups=[group], require_stable=require_stable)
            wanted = None if partitions is None else [
                OffsetFetchRequest.OffsetFetchRequestTopic(name=t, partition_indexes=ps)
                for t, ps in partitions.items()]
            return OffsetFetchRequest(group_id=group_id, topics=wanted,
                                      require_stable=require_stable and version >= 7)
        by_id_ok = topics is None or all(ids.values())
        version, response = self.client.call(build, node, api_key=OFFSET_FETCH,
                                             max_version=None if by_id_ok else BY_NAME_MAX_VERSION)
        if version >= 8:
            answer = response.groups[0]
            error_code, topic_answers = answer.error_code, answer.topics
        else:
            error_code, topic_answers = (response.error_code if version >= 2 else 0), response.topics
        if error_code:
            raise KafkaError(error_code, f"offsets of group {group_id}")
        names = self._topic_names(topic_answers, version)
        offsets = [CommittedOffset(names(topic), p.partition_index, p.committed_offset,
                                   p.committed_leader_epoch if version >= 5 else -1, p.metadata,
                                   error_or_none(p.error_code))
                   for topic in topic_answers for p in topic.partitions]
        if every_committed:
            offsets = [o for o in offsets if o.offset >= 0 or o.error is not None]
        return sorted(offsets, key=lambda o: (o.topic, o.partition))

    def _topic_names(self, topic_answers, version: int):
        """A function giving the topic name of an OffsetFetch/OffsetCommit answer entry (v10+ carry topic ids)."""
        if version <= BY_NAME_MAX_VERSION:
            return lambda topic: topic.name
        by_id = {t.topic_id: t.name for t in self.client.metadata(None).topics.values() if t.topic_id}
        return lambda topic: by_id.get(str(topic.topic_id), str(topic.topic_id))

    def commit_offsets(self, group_id: str, offsets: Mapping[tuple[str, int], int], *, generation: int = -1,
                       member_id: str = "", group_instance_id: str | None = None) -> list[PartitionResult]:
        """Commits {(topic, partition): offset} for a group, by default as an outsider (generation -1, member ""),
        as Kafka's admin client does: the group must have no active members (else UNKNOWN_MEMBER_ID or
        REBALANCE_IN_PROGRESS per partition); a member passes its generation and ids. One PartitionResult per
        partition, sorted. Topics go by id (OffsetCommit v10+) when the broker offers it and every topic has one,
        else by name."""
        node = self.client.coordinator(group_id)
        by_topic = defaultdict(list)
        for (topic, partition), offset in sorted(offsets.items()):
            by_topic[topic].append(OffsetCommitRequest.OffsetCommitRequestPartition(
                partition_index=partition, committed_offset=int(offset)))
        known = self.client.metadata(list(by_topic)).topics
        ids = {t: known[t].topic_id if t in known and not known[t].error else None for t in by_topic}

        def build(version):
            # retention and commit timestamps are left to the broker
            topics = [OffsetCommitRequest.OffsetCommitRequestTopic(partitions=ps, **_topic_key(t, ids, version))
                      for t, ps in by_topic.items()]
            return OffsetCommitRequest(group_id=group_id, generation_id_or_member_epoch=generation,
                                       member_id=member_id, group_instance_id=group_instance_id, topics=topics)
        version, response = self.client.call(build, node, api_key=OFFSET_COMMIT,
                                             max_version=None if all(ids.values()) else BY_NAME_MAX_VERSION)
        names = (lambda topic: topic.name) if version <= BY_NAME_MAX_VERSION else \
            (lambda topic: {uuid.UUID(i): t for t, i in ids.items()}.get(topic.topic_id, str(topic.topic_id)))
        results = [PartitionResult(names(t), p.partition_index, error_or_none(p.error_code))
                   for t in response.topics for p in t.partitions]
        return sorted(results, key=lambda r: (r.topic, r.partition))

    def describe_share_group_offsets(self, group_id: str, topics: list[str] | None = None) -> list[ShareGroupOffset]:
        """A share group's start offsets (DescribeShareGroupOffsets to its coordinator), sorted by topic and
        partition: of every share-partition it has state for (topics None), or of every partition of `topics`.
        Raises group-level errors (GROUP_ID_NOT_FOUND, GROUP_AUTHORIZATION_FAILED, ...)."""
        node = self.client.coordinator(group_id)
        wanted = None if topics is None else [
            DescribeShareGroupOffsetsRequest.DescribeShareGroupOffsetsRequestTopic(
                topic_name=t, partitions=sorted(self.client.topic(t).partitions)) for t in topics]
        request = DescribeShareGroupOffsetsRequest(groups=[
            DescribeShareGroupOffsetsRequest.DescribeShareGroupOffsetsRequestGroup(group_id=group_id, topics=wanted)])
        version, response = self.client.call(request, node)
        (answer,) = response.groups
        if answer.error_code:
            raise KafkaError(answer.error_code, answer.error_message or f"offsets of share group {group_id}")
        offsets = [ShareGroupOffset(t.topic_name, p.partition_index, p.start_offset, p.leader_epoch,
                                    p.lag if version >= 1 else -1, error_or_none(p.error_code, p.error_message))
                   for t in answer.topics for p in t.partitions]
        return sorted(offsets, key=lambda o: (o.topic, o.partition))

    def alter_share_group_offsets(self, group_id: str,
                                  offsets: Mapping[tuple[str, int], int]) -> list[PartitionResult]:
        """Sets the start offsets {(topic, partition): offset} of a share group's share-partitions
        (AlterShareGroupOffsets, Kafka 4.1+, as kafka-share-groups.sh --reset-offsets): the group must be empty,
        else the group-level NON_EMPTY_GROUP is raised (as GROUP_ID_NOT_FOUND for no such share group). One
        PartitionResult per partition, sorted."""
        node = self.client.coordinator(group_id)
        by_topic = defaultdict(list)
        for (topic, partition), offset in sorted(offsets.items()):
            by_topic[topic].append(AlterShareGroupOffsetsRequest.AlterShareGroupOffsetsRequestPartition(
                partition_index=partition, start_offset=int(offset)))
        topics = [AlterShareGroupOffsetsRequest.AlterShareGroupOffsetsRequestTopic(topic_name=t, partitions=ps)
                  for t, ps in by_topic.items()]
        response = self.client.send(AlterShareGroupOffsetsRequest(group_id=group_id, topics=topics), node)
        if response.error_code:
            raise KafkaError(response.error_code, response.error_message or f"offsets of share group {group_id}")
        results = {(t.topic_name, p.partition_index): PartitionResult(t.topic_name, p.partition_index,
                                                                       error_or_none(p.error_code, p.error_message))
                   for t in response.responses for p in t.partitions}
        for topic, partition in offsets:  # a partition the broker left out of its answer did not change
            results.setdefault((topic, partition), PartitionResult(topic, partition, KafkaError(
                ErrorCode.UNKNOWN_SERVER_ERROR, "no result given")))
        return sorted(results.values(), key=lambda r: (r.topic, r.partition))

    def delete_groups(self, group_ids: list[str]) -> list[GroupResult]:
        """Deletes groups (DeleteGroups to each coordinator); one GroupResult per id (NON_EMPTY_GROUP,
        GROUP_ID_NOT_FOUND, ...)."""
        results = {}
        by_node = defaultdict(list)
        for group_id, node in self.client.coordinators(list(group_ids)).items():
            if isinstance(node, KafkaError):
                results[group_id] = GroupResult(group_id, node)
            else:
                by_node[node].append(group_id)
        for node, ids in by_node.items():
            response = self.client.send(DeleteGroupsRequest(groups_names=ids), node)
            for answer in response.results:
                results[answer.group_id] = GroupResult(answer.group_id, error_or_none(answer.error_code))
        return [results.get(g) or GroupResult(g, KafkaError(ErrorCode.UNKNOWN_SERVER_ERROR, "no result given"))
                for g in dict.fromkeys(group_ids)]

    def delete_offsets(self, group_id: str, partitions: list[tuple[str, int]]) -> list[PartitionResult]:
        """Deletes a group's committed offsets of `partitions` (OffsetDelete); one PartitionResult per partition
        (GROUP_SUBSCRIBED_TO_TOPIC while members consume it). Raises group-level errors."""
        node = self.client.coordinator(group_id)
        by_topic = defaultdict(list)
        for topic, partition in sorted(set(partitions)):
            by_topic[topic].append(OffsetDeleteRequest.OffsetDeleteRequestPartition(partition_index=partition))
        topics = [OffsetDeleteRequest.OffsetDeleteRequestTopic(name=t, partitions=ps) for t, ps in by_topic.items()]
        response = self.client.send(OffsetDeleteRequest(group_id=group_id, topics=topics), node)
        if response.error_code:
            raise KafkaError(response.error_code, f"offsets of group {group_id}")
        results = [PartitionResult(t.name, p.partition_index, error_or_none(p.error_code))
                   for t in response.topics for p in t.partitions]
        return sorted(results, key=lambda r: (r.topic, r.partition))

    # --- ACLs ---------------------------------------------------------------------------------------------------

    def describe_acls(self, acl_filter: AclFilter | None = None) -> list[AclBinding]:
        """The ACLs matching `acl_filter` (default: all). Raises SECURITY_DISABLED when no authorizer runs."""
        f = acl_filter or AclFilter()
        request = DescribeAclsRequest(
            resource_type_filter=_code(ACL_RESOURCE_TYPES, f.resource_type, "resource type"),
            resource_name_filter=f.resource_name, pattern_type_filter=_code(ACL_PATTERN_TYPES, f.pattern_type,
                                                                            "pattern type"),
            principal_filter=f.principal, host_filter=f.host,
            operation=_code(ACL_OPERATIONS, f.operation, "operation"),
            permission_type=_code(ACL_PERMISSIONS, f.permission, "permission"))
        response = self.client.send(request, min_version=1)
        if response.error_code:
            raise KafkaError(response.error_code, response.error_message)
        bindings = [AclBinding(_name(ACL_RESOURCE_TYPES, r.resource_type), r.resource_name, a.principal,
                               _name(ACL_OPERATIONS, a.operation), _name(ACL_PERMISSIONS, a.permission_type),
                               _name(ACL_PATTERN_TYPES, r.pattern_type), a.host)
                    for r in response.resources for a in r.acls]
        return sorted(bindings, key=_binding_key)

    def create_acls(self, bindings: list[AclBinding]) -> list[AclResult]:
        """Adds ACLs; one AclResult per binding, in order."""
        creations = [CreateAclsRequest.AclCreation(
            resource_type=_code(ACL_RESOURCE_TYPES, b.resource_type, "resource type"), resource_name=b.resource_name,
            resource_pattern_type=_code(ACL_PATTERN_TYPES, b.pattern_type, "pattern type"), principal=b.principal,
            host=b.host, operation=_code(ACL_OPERATIONS, b.operation, "operation"),
            permission_type=_code(ACL_PERMISSIONS, b.permission, "permission")) for b in bindings]
        response = self.client.send(CreateAclsRequest(creations=creations), min_version=1)
        return [AclResult(b, error_or_none(r.error_code, r.error_message))
                for b, r in zip(bindings, response.results)]

    def delete_acls(self, filters: list[AclFilter]) -> list[DeleteAclsResult]:
        """Deletes the ACLs matching each filter; one DeleteAclsResult per filter with the bindings removed."""
        request = DeleteAclsRequest(filters=[DeleteAclsRequest.DeleteAclsFilter(
            resource_type_filter=_code(ACL_RESOURCE_TYPES, f.resource_type, "resource type"),
            resource_name_filter=f.resource_name,
            pattern_type_filter=_code(ACL_PATTERN_TYPES, f.pattern_type, "pattern type"),
            principal_filter=f.principal, host_filter=f.host,
            operation=_code(ACL_OPERATIONS, f.operation, "operation"),
            permission_type=_code(ACL_PERMISSIONS, f.permission, "permission")) for f in filters])
        response = self.client.send(request, min_version=1)
        results = []
        for f, answer in zip(filters, response.filter_results):
            deleted = [AclResult(AclBinding(_name(ACL_RESOURCE_TYPES, m.resource_type), m.resource_name, m.principal,
                                            _name(ACL_OPERATIONS, m.operation), _name(ACL_PERMISSIONS,
                                                                                      m.permission_type),
                                            _name(ACL_PATTERN_TYPES, m.pattern_type), m.host),
                                 error_or_none(m.error_code, m.error_message)) for m in answer.matching_acls]
            results.append(DeleteAclsResult(f, error_or_none(answer.error_code, answer.error_message), deleted))
        return results

    # --- SCRAM users --------------------------------------------------------------------------------------------

    def describe_scram_users(self, users: list[str] | None = None) -> list[ScramUser]:
        """SCRAM credentials (mechanism and iterations, never secrets) of `users` (None: every user that has
        one), sorted by user; an unknown user carries RESOURCE_NOT_FOUND."""
        wanted = None if users is None else [DescribeUserScramCredentialsRequest.UserName(name=u) for u in users]
        response = self.client.send(DescribeUserScramCredentialsRequest(users=wanted))
        if response.error_code:
            raise KafkaError(response.error_code, response.error_message)
        found = [ScramUser(r.user, [ScramCredential(_scram_name(c.mechanism), c.iterations)
                                    for c in r.credential_infos], error_or_none(r.error_code, r.error_message))
                 for r in response.results]
        return sorted(found, key=lambda u: u.user)

    def alter_scram_users(self, upsertions: list[ScramUpsertion] = (),
                          deletions: list[tuple[str, str]] = ()) -> list[UserResult]:
        """Sets and removes SCRAM credentials ((user, mechanism) for deletions); passwords are salted here (a
        random salt, PBKDF2 with `iterations`) and never sent. One UserResult per user named, in order: the first
        error of that user's changes, or None.

        Kafka refuses a request that changes one user twice (DUPLICATE_RESOURCE), so changes of several
        mechanisms of one user go in consecutive requests (deletions first), each user at most once in each."""
        changes = [("delete", user, mechanism, None) for user, mechanism in deletions]
        changes += [("upsert", u.user, u.mechanism, u) for u in upsertions]
        for _kind, _user, mechanism, upsertion in changes:
            _scram_code(mechanism)
            if upsertion is not None and upsertion.iterations < SCRAM_MIN_ITERATIONS:
                raise ValueError(f"iterations must be at least {SCRAM_MIN_ITERATIONS}, got {upsertion.iterations}")
        errors: dict[str, KafkaError | None] = {user: None for _kind, user, _m, _u in changes}
        controller = self._controller() if changes else None
        while changes:
            round_users, this_round, later = set(), [], []
            for change in changes:
                (later if change[1] in round_users else this_round).append(change)
                round_users.add(change[1])
            for result in self._alter_scram_round(this_round, controller):
                errors[result.user] = errors.get(result.user) or result.error
            changes = later
        return [UserResult(user, error) for user, error in errors.items()]

    def _alter_scram_round(self, changes, node) -> list[UserResult]:
        removals, upserts = [], []
        for kind, user, mechanism, upsertion in changes:
            if kind == "delete":
                removals.append(AlterUserScramCredentialsRequest.ScramCredentialDeletion(
                    name=user, mechanism=_scram_code(mechanism)))
                continue
            salt = _random_salt()
            upserts.append(AlterUserScramCredentialsRequest.ScramCredentialUpsertion(
                name=user, mechanism=_scram_code(mechanism), iterations=upsertion.iterations, salt=salt,
                salted_password=salted_password(mechanism, upsertion.password, salt, upsertion.iterations)))
        response = self.client.send(AlterUserScramCredentialsRequest(deletions=removals, upsertions=upserts), node)
        return [UserResult(r.user, error_or_none(r.error_code, r.error_message)) for r in response.results]


# --- helpers ------------------------------------------------------------------------------------------------------

_STALE_LEADER = (ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.LEADER_NOT_AVAILABLE, ErrorCode.FENCED_LEADER_EPOCH,
                 ErrorCode.UNKNOWN_LEADER_EPOCH, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                 ErrorCode.NETWORK_EXCEPTION, ErrorCode.REQUEST_TIMED_OUT)


def _offset_spec(spec) -> int:
    if isinstance(spec, str) and spec.strip().lower() in OFFSET_SPECS:
        return OFFSET_SPECS[spec.strip().lower()]
    if isinstance(spec, int) or (isinstance(spec, str) and spec.strip().isdigit()):
        return int(spec)
    raise ValueError(f"offset spec must be earliest, latest, max-timestamp or a timestamp in ms: {spec!r}")


def resource_type_code(resource_type) -> int:
    """A ConfigResource type from its name (TOPIC, BROKER, BROKER_LOGGER, CLIENT_METRICS, GROUP; case and -/_
    insensitive) or code."""
    if isinstance(resource_type, int):
        return resource_type
    key = str(resource_type).strip().upper().replace("-", "_")
    if key not in RESOURCE_TYPES:
        raise ValueError(f"unknown config resource type {resource_type!r}; use {', '.join(RESOURCE_TYPES)}")
    return RESOURCE_TYPES[key]


def alter_op_code(op) -> int:
    if isinstance(op, int) and op in ALTER_OPS.values():
        return op
    key = str(op).strip().upper()
    if key not in ALTER_OPS:
        raise ValueError(f"unknown config operation {op!r}; use {', '.join(ALTER_OPS)}")
    return ALTER_OPS[key]


def _config_entry(entry, version: int, rtype: int) -> ConfigEntry:
    if version >= 1:
        source = CONFIG_SOURCES.get(entry.config_source, "UNKNOWN")
    elif entry.is_default:
        source = "DEFAULT_CONFIG"
    else:
        source = CONFIG_SOURCES.get(_OVERRIDE_SOURCE.get(rtype, 4), "UNKNOWN")
    synonyms = [ConfigSynonym(s.name, s.value, CONFIG_SOURCES.get(s.source, "UNKNOWN"))
                for s in (entry.synonyms if version >= 1 else [])]
    config_type = CONFIG_TYPES[entry.config_type] if version >= 3 and 0 <= entry.config_type < len(CONFIG_TYPES) \
        else "UNKNOWN"
    return ConfigEntry(entry.name, entry.value, source, entry.read_only, entry.is_sensitive,
                       source == "DEFAULT_CONFIG", synonyms, config_type,
                       entry.documentation if version >= 3 else None)


def _topic_key(topic: str, ids: dict[str, str | None], version: int) -> dict:
    """The fields naming a topic in OffsetFetch/OffsetCommit: its id from v10, its name before."""
    if version > BY_NAME_MAX_VERSION:
        return {"topic_id": uuid.UUID(ids[topic])}
    return {"name": topic}


def _not_found(description: GroupDescription) -> bool:
    return description.error is not None and description.error.code == ErrorCode.GROUP_ID_NOT_FOUND


def _partitions_of(assignment) -> list[TopicPartition]:
    return sorted((TopicPartition(tp.topic_name, p) for tp in assignment.topic_partitions for p in tp.partitions),
                  key=lambda tp: (tp.topic, tp.partition))


def _modern_group(group, group_type: str, node: int) -> GroupDescription:
    members = []
    for m in group.members:
        members.append(MemberDescription(
            m.member_id, m.client_id, m.client_host, getattr(m, "instance_id", None), m.rack_id, m.member_epoch,
            _partitions_of(m.assignment),
            _partitions_of(m.target_assignment) if hasattr(m, "target_assignment") else None,
            sorted(m.subscribed_topic_names), getattr(m, "subscribed_topic_regex", None)))
    return GroupDescription(group.group_id, group_type, group.group_state, node, assignor=group.assignor_name,
                            group_epoch=group.group_epoch, assignment_epoch=group.assignment_epoch,
                            members=members, error=error_or_none(group.error_code, group.error_message))


def _consumer_protocol(message_cls, data):
    """The ConsumerProtocolSubscription/Assignment in `data`, or None when the bytes cannot be read."""
    try:
        return read_consumer_protocol(message_cls, data)[1]
    except KafkaError:
        return None


def _classic_member(member, protocol_type: str) -> MemberDescription:
    assignment, topics = [], []
    if protocol_type == "consumer":
        decoded = _consumer_protocol(ConsumerProtocolAssignment, member.member_assignment)
        if decoded is None and len(member.member_assignment or b""):
            assignment = None
        elif decoded is not None:
            assignment = sorted((TopicPartition(tp.topic, p) for tp in decoded.assigned_partitions
                                 for p in tp.partitions), key=lambda tp: (tp.topic, tp.partition))
        subscription = _consumer_protocol(ConsumerProtocolSubscription, member.member_metadata)
        topics = sorted(subscription.topics) if subscription is not None else []
    return MemberDescription(member.member_id, member.client_id, member.client_host,
                             getattr(member, "group_instance_id", None), assignment=assignment,
                             subscribed_topics=topics)


def _code(names: tuple[str, ...], value, what: str) -> int:
    if isinstance(value, int):
        return value
    key = "ANY" if value is None else str(value).strip().upper().replace("-", "_")
    if key not in names:
        raise ValueError(f"unknown ACL {what} {value!r}; use {', '.join(n for n in names if n != 'UNKNOWN')}")
    return names.index(key)


def _name(names: tuple[str, ...], code: int) -> str:
    return names[code] if 0 <= code < len(names) else f"UNKNOWN({code})"


def _binding_key(b: AclBinding):
    return (b.resource_type, b.resource_name, b.pattern_type, b.principal, b.host, b.operation, b.permission)


def _scram_code(mechanism: str) -> int:
    if mechanism not in SCRAM_MECHANISMS:
        raise ValueError(f"unknown SCRAM mechanism {mechanism!r}; use {', '.join(SCRAM_MECHANISMS)}")
    return SCRAM_MECHANISMS[mechanism]


def _scram_name(code: int) -> str:
    return {v: k for k, v in SCRAM_MECHANISMS.items()}.get(code, f"UNKNOWN({code})")


def _random_salt() -> bytes:
    # as Kafka's ScramFormatter.secureRandomBytes: a random 130-bit number written in base 36, as bytes
    number, digits = secrets.randbits(130), ""
    while number:
        number, digit = divmod(number, 36)
        digits = "0123456789abcdefghijklmnopqrstuvwxyz"[digit] + digits
    return (digits or "0").encode()

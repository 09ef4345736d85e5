"""CreateTopics (API key 19), versions 0-7: create topics with a partition count, a replication factor or explicit
replica assignments, and topic-level config overrides.

Behaviour, as Kafka's controller (KRaft) decides:
- Authorization comes first: CREATE on the cluster allows every topic; otherwise each topic needs CREATE on itself,
  else it answers TOPIC_AUTHORIZATION_FAILED ("Authorization failed.") and is neither checked nor created. A topic
  created (or validated) without DESCRIBE_CONFIGS on it is answered without its configs, partition count and
  replication factor (-1), with TOPIC_AUTHORIZATION_FAILED as its `topic_config_error_code` (v5+).
- A request asking for more than 10,000 partitions in all (MAX_PARTITIONS_PER_BATCH: num_partitions -1 counts as
  `num.partitions`, a topic with assignments counts its assignments, invalid counts count 0) is refused as a whole:
  every topic answers POLICY_VIOLATION "Excessively large number of partitions per request.", and nothing is
  created. Duplicated names, `__cluster_metadata` and topics the principal may not create are left out of the
  count, as Kafka's controller never sees them.
Then topic by topic:
- A name given twice in one request answers INVALID_REQUEST ("Duplicate topic name.") once, and neither copy is
  created. `__cluster_metadata` answers INVALID_REQUEST. An illegal name (Kafka's rules, see `topic_names`) or one
  that collides with an existing topic ('.' versus '_') answers INVALID_TOPIC_EXCEPTION, an existing topic
  TOPIC_ALREADY_EXISTS.
- Configs: a null value answers INVALID_CONFIG, and so does a name or value that storage refuses (ConfigError). A
  topic config Kafka 4.0 removed (`message.format.version`, `message.downconversion.enable`,
  `message.timestamp.difference.max.ms`) answers INVALID_CONFIG "Unknown topic config name: <name>", as Kafka 4.x
  does, unless the broker emulates Kafka 3.x (`--emulate 3.9` or `2.8`), which takes and describes them as 3.9 does.
- Counts: num_partitions -1 takes `num.partitions`, replication_factor -1 takes `default.replication.factor`; 0 or
  below -1 answers INVALID_REPLICATION_FACTOR (checked first) or INVALID_PARTITIONS. The controller places the
  replicas (Kafka's rack-aware striping, `compatbroker.cluster.placement`); a replication factor above the nodes
  registered answers INVALID_REPLICATION_FACTOR ("Unable to replicate the partition 3 time(s): The target
  replication factor of 3 cannot be reached because only 1 broker(s) are registered."), and so does a cluster whose
  nodes are all stopped.
- Explicit assignments need both counts at -1 (INVALID_REQUEST otherwise); each partition once, consecutive from 0,
  every replica list non-empty, naming registered nodes only and each once, all lists of one length, at least one
  node of each list alive (INVALID_REPLICA_ASSIGNMENT otherwise). The replicas keep the given order: the first is
  the preferred leader.
- Creation is all or nothing: when storage fails halfway (EMFILE, ENOSPC, ...) the partitions made are removed,
  the topic does not exist, and it answers UNKNOWN_SERVER_ERROR without a message, as Kafka's ApiError does for an
  unexpected exception (the cause goes to the log, one WARNING line).
- `validate_only` runs every check, the controller's placement included, and answers as a creation would (with a
  topic id that is then thrown away, as Kafka does) but creates nothing.
- Answers carry Kafka's error messages (v1+). From v5 a created topic reports its partition count, replication
  factor and every topic config with its source (`config_catalog`), from v7 its topic id.

Deviations: `timeout_ms` is not used (creation is synchronous). Names that collide with each other within one
request are refused in request order (Kafka checks collisions only against topics that existed before the request,
and so would create both). Results keep the request's order, duplicates last. The partition total is counted
without Java's int overflow, so huge counts cannot wrap past the cap.
"""
from __future__ import annotations

import logging
import uuid
from collections import Counter
from dataclasses import dataclass
from typing import TYPE_CHECKING

from .. import config_catalog, topic_names
from ..cluster.controller import ControllerError
from ..protocol.error_codes import ErrorCode
from ..protocol.messages import CreateTopicsResponse
from ..security.acls.types import CLUSTER_NAME, AclOperation, ResourceType
from ..storage import StorageError
from ..storage.log_config import ConfigError

if TYPE_CHECKING:
    from . import RequestContext

API_KEY = 19
MIN_VERSION = 0
MAX_VERSION = 7

DEFAULT = -1  # num_partitions / replication_factor: the broker's default
MAX_PARTITIONS_PER_BATCH = 10_000  # Kafka's ReplicationControlManager: partitions one request may create
TOO_MANY_PARTITIONS = "Excessively large number of partitions per request."
AUTHORIZATION_FAILED = "Authorization failed."  # Kafka's ControllerApis message for a topic it may not create
Result = CreateTopicsResponse.CreatableTopicResult
ConfigResult = CreateTopicsResponse.CreatableTopicConfigs
log = logging.getLogger(__name__)


class Refused(Exception):
    """A topic (or its new partitions) cannot be created: the error code and Kafka's message for it."""

    def __init__(self, error_code: ErrorCode, message: str | None):
        super().__init__(message)
        self.error_code = error_code
        self.message = message


@dataclass(frozen=True)
class _Plan:
    partitions: int
    replication_factor: int
    configs: dict[str, str]
    assignment: dict[int, list[int]] | None  # manual: partition -> node ids


async def handle(ctx: RequestContext, request) -> CreateTopicsResponse:
    counts = Counter(topic.name for topic in request.topics)
    allowed = {name for name, count in counts.items()
               if count == 1 and name != topic_names.CLUSTER_METADATA_TOPIC}
    creatable = _creatable(ctx, allowed)
    describable = ctx.filter_authorized(AclOperation.DESCRIBE_CONFIGS, ResourceType.TOPIC, allowed,
                                        log_if_denied=False)
    wanted = [topic for topic in request.topics if topic.name in creatable]
    if requested_partitions(wanted, ctx.broker.config.num_partitions) > MAX_PARTITIONS_PER_BATCH:
        return CreateTopicsResponse(throttle_time_ms=0, topics=[
            Result(name=topic.name, error_code=ErrorCode.POLICY_VIOLATION, error_message=TOO_MANY_PARTITIONS)
            for topic in request.topics])
    results = []
    for topic in request.topics:
        if counts[topic.name] > 1:
            continue
        if topic.name in allowed and topic.name not in creatable:
            results.append(Result(name=topic.name, error_code=ErrorCode.TOPIC_AUTHORIZATION_FAILED,
                                  error_message=AUTHORIZATION_FAILED))
        else:
            results.append(_create(ctx, topic, request.validate_only, with_configs=topic.name in describable))
    results += [Result(name=name, error_code=ErrorCode.INVALID_REQUEST, error_message="Duplicate topic name.")
                for name, count in counts.items() if count > 1]
    return CreateTopicsResponse(throttle_time_ms=0, topics=results)


def _creatable(ctx: RequestContext, names: set[str]) -> set[str]:
    """The topics the principal may create: all with CREATE on the cluster (its denial is not logged: the topic
    check follows), else those with CREATE on the topic."""
    if ctx.authorize(AclOperation.CREATE, ResourceType.CLUSTER, CLUSTER_NAME, log_if_denied=False):
        return set(names)
    return ctx.filter_authorized(AclOperation.CREATE, ResourceType.TOPIC, names)


def requested_partitions(topics, default_partitions: int) -> int:
    """Kafka's upper bound of the partitions a CreateTopics request creates (validateTotalNumberOfPartitions)."""
    total = 0
    for topic in topics:
        if topic.assignments:
            total += len(topic.assignments)
        elif topic.num_partitions == DEFAULT:
            total += default_partitions
        elif topic.num_partitions > 0:
            total += topic.num_partitions
    return total


def _create(ctx: RequestContext, topic, validate_only: bool, *, with_configs: bool):
    broker = ctx.broker
    try:
        plan = _plan(broker, topic)
        topic_id = _validate(broker, topic.name, plan) if validate_only else _create_topic(broker, topic.name, plan)
    except Refused as refused:
        return Result(name=topic.name, error_code=refused.error_code, error_message=refused.message)
    result = Result(name=topic.name, topic_id=topic_id, error_code=ErrorCode.NONE, error_message=None)
    if not with_configs:  # Kafka keeps what the principal may not DESCRIBE_CONFIGS to itself
        result.topic_config_error_code = ErrorCode.TOPIC_AUTHORIZATION_FAILED
        return result
    result.num_partitions = plan.partitions
    result.replication_factor = plan.replication_factor
    if ctx.api_version >= 5:
        result.configs = _config_results(broker, topic.name, plan.configs, created=not validate_only)
    return result


def _validate(broker, name: str, plan: _Plan) -> uuid.UUID:
    """validate_only: the controller places the topic (or refuses to), and nothing is kept; the topic id Kafka
    then answers is thrown away too."""
    try:
        broker.controller.plan_topic(name, plan.partitions, plan.replication_factor, assignment=plan.assignment,
                                     internal=topic_names.is_internal(name))
    except ControllerError as exc:
        raise Refused(exc.code, exc.message) from exc
    return uuid.uuid4()


def _create_topic(broker, name: str, plan: _Plan) -> uuid.UUID:
    try:
        return broker.create_topic(name, plan.partitions, plan.configs, replication_factor=plan.replication_factor,
                                   assignment=plan.assignment).topic_id
    except ControllerError as exc:  # placement refused (too few nodes, ...): nothing was made
        raise Refused(exc.code, exc.message) from exc
    except (OSError, StorageError) as exc:  # expected under resource exhaustion: nothing is left of the topic
        log.warning("creating topic %s with %d partition(s) failed, nothing created: %s", name, plan.partitions,
                    exc)
        raise Refused(ErrorCode.UNKNOWN_SERVER_ERROR, None) from exc


# --- the checks, in Kafka's order -----------------------------------------------------------------------------------

def _plan(broker, topic) -> _Plan:
    _check_name(broker, topic.name)
    configs = _configs(broker, topic.configs)
    if topic.assignments:
        assignment = _manual_assignment(broker, topic)
        return _Plan(len(assignment), len(assignment[0]), configs, assignment)
    partitions, replication_factor = _layout(broker, topic)
    return _Plan(partitions, replication_factor, configs, None)


def _check_name(broker, name: str) -> None:
    if name == topic_names.CLUSTER_METADATA_TOPIC:
        raise Refused(ErrorCode.INVALID_REQUEST, f"Creation of internal topic {name} is prohibited.")
    reason = topic_names.invalid_reason(name)
    if reason is not None:
        raise Refused(ErrorCode.INVALID_TOPIC_EXCEPTION, f"Topic name is invalid: {reason}")
    if broker.topic(name) is not None:
        raise Refused(ErrorCode.TOPIC_ALREADY_EXISTS, f"Topic '{name}' already exists.")
    other = topic_names.find_collision(name, broker.topics())
    if other is not None:
        raise Refused(ErrorCode.INVALID_TOPIC_EXCEPTION, f"Topic '{name}' collides with existing topic: {other}")


def _configs(broker, entries) -> dict[str, str]:
    """The request's config overrides (a name given twice keeps its last value, as Kafka's map does)."""
    nulls = [entry.name for entry in entries if entry.value is None]
    if nulls:
        raise Refused(ErrorCode.INVALID_CONFIG, f"Null value not supported for topic configs: {','.join(nulls)}")
    configs = {entry.name: entry.value for entry in entries}
    try:
        broker.check_topic_configs(configs)
    except ConfigError as exc:
        raise Refused(ErrorCode.INVALID_CONFIG, str(exc)) from exc
    return configs


def _layout(broker, topic) -> tuple[int, int]:
    """(partition count, replication factor) of the new topic; the controller then places the replicas."""
    if topic.replication_factor < DEFAULT or topic.replication_factor == 0:
        raise Refused(ErrorCode.INVALID_REPLICATION_FACTOR,
                      "Replication factor must be larger than 0, or -1 to use the default value.")
    if topic.num_partitions < DEFAULT or topic.num_partitions == 0:
        raise Refused(ErrorCode.INVALID_PARTITIONS, "Number of partitions was set to an invalid non-positive value.")
    config = broker.config
    partitions = config.num_partitions if topic.num_partitions == DEFAULT else topic.num_partitions
    replication_factor = (config.default_replication_factor if topic.replication_factor == DEFAULT
                          else topic.replication_factor)
    return partitions, replication_factor


def _manual_assignment(broker, topic) -> dict[int, list[int]]:
    """The request's replica assignment, checked in the order of Kafka's ReplicationControlManager."""
    if topic.replication_factor != DEFAULT:
        raise Refused(ErrorCode.INVALID_REQUEST, "A manual partition assignment was specified, but replication "
                                                 "factor was not set to -1.")
    if topic.num_partitions != DEFAULT:
        raise Refused(ErrorCode.INVALID_REQUEST, "A manual partition assignment was specified, but numPartitions "
                                                 "was not set to -1.")
    assignment: dict[int, list[int]] = {}
    replication_factor = None
    for entry in topic.assignments:
        if entry.partition_index in assignment:
            raise Refused(ErrorCode.INVALID_REPLICA_ASSIGNMENT, "Found multiple manual partition assignments for "
                                                                f"partition {entry.partition_index}")
        check_replicas(broker, entry.broker_ids, replication_factor, entry.partition_index)
        replication_factor = len(entry.broker_ids)
        assignment[entry.partition_index] = list(entry.broker_ids)
    if set(assignment) != set(range(len(assignment))):
        raise Refused(ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                      "partitions should be a consecutive 0-based integer sequence")
    return dict(sorted(assignment.items()))


def check_replicas(broker, broker_ids: list[int], replication_factor: int | None, partition: int) -> None:
    """Kafka's checks of one partition's manual replica list (CreateTopics and CreatePartitions): non-empty, every
    broker registered and named once, as many replicas as the other partitions have, one of them not fenced (a
    stopped node is)."""
    if not broker_ids:
        raise Refused(ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                      "The manual partition assignment includes an empty replica list.")
    previous = None
    registered = broker.metadata.nodes
    for broker_id in sorted(broker_ids):
        if broker_id not in registered:
            raise Refused(ErrorCode.INVALID_REPLICA_ASSIGNMENT, f"The manual partition assignment includes broker "
                                                                f"{broker_id}, but no such broker is registered.")
        if broker_id == previous:
            raise Refused(ErrorCode.INVALID_REPLICA_ASSIGNMENT, f"The manual partition assignment includes the "
                                                                f"broker {broker_id} more than once.")
        previous = broker_id
    if replication_factor is not None and len(broker_ids) != replication_factor:
        raise Refused(ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                      f"The manual partition assignment includes a partition with {len(broker_ids)} replica(s), but "
                      f"this is not consistent with previous partitions, which have {replication_factor} "
                      "replica(s).")
    if not any(broker.metadata.is_alive(broker_id) for broker_id in broker_ids):
        raise Refused(ErrorCode.INVALID_REPLICA_ASSIGNMENT, f"All brokers specified in the manual partition "
                                                            f"assignment for partition {partition} are fenced or in "
                                                            "controlled shutdown.")


# --- v5+: the configs of the new topic ------------------------------------------------------------------------------

def _config_results(broker, name: str, overrides: dict[str, str], *, created: bool) -> list:
    """Every topic config of the topic, sorted by name, as DescribeConfigs describes it (sensitive values hidden).
    A validate-only request describes the topic it would have created: the broker's defaults, with the request's
    overrides applied as topic-level settings."""
    results = []
    for entry in config_catalog.describe_topic_configs(broker, name):
        value, source = entry.value, entry.source
        if not created and entry.name in overrides:
            value = config_catalog.normalized(config_catalog.topic_config_key(entry.name), overrides[entry.name])
            source = config_catalog.DYNAMIC_TOPIC_CONFIG
        results.append(ConfigResult(name=entry.name, value=None if entry.is_sensitive else value,
                                    read_only=entry.read_only, config_source=source,
                                    is_sensitive=entry.is_sensitive))
    return results

"""Metadata (API key 3), versions 0-13: the brokers of the cluster, its cluster id and controller, and the partitions
of the requested topics with their leaders and replicas. Every node answers for the whole cluster.

Behaviour, as Kafka's:
- Which topics: all of them when `topics` is null (v1+) or empty in v0 (sarama relies on this); none for an empty
  list from v1; from v12 topics may be named by id, and then only the ids count (names in the same request are
  ignored), unknown ids answering UNKNOWN_TOPIC_ID with a null name. Versions 10 and 11 carry an id field but may not
  use it: a null name or a non-zero id there fails the whole request with INVALID_REQUEST on every listed topic.
- A missing topic is created when the request allows it (always for v0-3, `allow_auto_topic_creation` from v4) and
  `auto.create.topics.enable` is on; it is created with `num.partitions` partitions and `default.replication.factor`
  replicas and answered with LEADER_NOT_AVAILABLE and no partitions, so clients ask again. Internal topics get their
  own partition count, replication factor (at most the live nodes, as the coordinators create them) and settings
  (`offsets.topic.num.partitions`, `offsets.topic.replication.factor`, ...). A creation the controller refuses (a
  replication factor above the registered nodes: INVALID_REPLICATION_FACTOR) creates nothing and answers
  UNKNOWN_TOPIC_OR_PARTITION, as Kafka's KRaft broker answers every topic it asks the controller for, with one
  WARNING line. A request for all topics never creates one. Otherwise a missing topic is
  UNKNOWN_TOPIC_OR_PARTITION, and an illegal name INVALID_TOPIC_EXCEPTION in every case.
- Brokers: the live nodes (a stopped one is fenced and left out), each with its endpoint on the listener the request
  came in on and its `broker.rack` (v1+). The controller id is a live broker, as a KRaft broker names one at random
  (clients send it admin requests): the node answering.
- Each partition (KRaftMetadataCache): its leader, leader epoch, replicas in assignment order, ISR and offline
  replicas (those on stopped nodes, v5+). A partition without a leader (no live in-sync replica) answers
  LEADER_NOT_AVAILABLE with leader -1 and its epoch. Version 0 lists only live replicas and ISR members and answers
  REPLICA_NOT_AVAILABLE for a led partition that lost some that way. Topic ids from v10, `is_internal` from v1.
- Authorization (KafkaApis.handleTopicMetadataRequest): a topic the principal may not DESCRIBE is left out of an
  all-topics answer (without a log line), and a named one answers TOPIC_AUTHORIZATION_FAILED without partitions,
  id or `is_internal` (named by id: the id, with a null name), without saying whether it exists. A missing topic
  is created only with CREATE on the cluster or on that topic; without either it answers
  TOPIC_AUTHORIZATION_FAILED (with its `is_internal`) and nothing is created. Kafka's order follows: unknown ids,
  the topics shown, those refused creation, those refused description.
- Authorized operations (v8+), when asked for: each topic shown reports the operations the principal may do on it
  (`ctx.authorized_operations`; without an authorizer every operation Kafka supports on topics, 3576), a refused
  one and an unknown id nothing (INT32_MIN); the cluster (v8-10) its operations with DESCRIBE on it (without an
  authorizer every cluster operation, 8096), else 0. INT32_MIN when not asked for.

Deviations: Kafka in KRaft mode answers UNKNOWN_TOPIC_OR_PARTITION (ZooKeeper mode: LEADER_NOT_AVAILABLE) for a topic
it has just asked the controller to create; we create it synchronously and answer LEADER_NOT_AVAILABLE. A name that
collides with an existing topic ('.' versus '_') is answered INVALID_TOPIC_EXCEPTION at once, where Kafka's
controller refuses the creation later. Within each of the groups above topics are listed in request order, or by
name for "all topics" (Kafka's order is that of a hash set).
"""
from __future__ import annotations

import logging
import uuid
from typing import TYPE_CHECKING, NamedTuple

from .. import topic_names
from ..protocol.error_codes import ErrorCode
from ..protocol.messages import MetadataResponse
from ..protocol.wire import ZERO_UUID
from ..cluster.controller import ControllerError
from ..cluster.metadata import NO_LEADER
from ..security.acls.types import CLUSTER_NAME, AclOperation, ResourceType
from ..storage import StorageError

if TYPE_CHECKING:
    from . import RequestContext

API_KEY = 3
MIN_VERSION = 0
MAX_VERSION = 13

AUTHORIZED_OPERATIONS_OMITTED = -2**31
# With no authorizer Kafka grants everything it supports, as ctx.authorized_operations answers then: READ, WRITE,
# CREATE, DELETE, ALTER, DESCRIBE, DESCRIBE_CONFIGS, ALTER_CONFIGS on a topic; CREATE, ALTER, DESCRIBE,
# CLUSTER_ACTION, DESCRIBE_CONFIGS, ALTER_CONFIGS, IDEMPOTENT_WRITE on the cluster (bit n = ACL operation code n).
TOPIC_AUTHORIZED_OPERATIONS = sum(1 << code for code in (3, 4, 5, 6, 7, 8, 10, 11))
CLUSTER_AUTHORIZED_OPERATIONS = sum(1 << code for code in (5, 7, 8, 9, 10, 11, 12))

# Internal topics: (partition count setting, its default, (replication factor setting, its default), topic-level
# settings Kafka creates them with).
_INTERNAL_TOPIC_SPECS = {
    topic_names.GROUP_METADATA_TOPIC: ("offsets.topic.num.partitions", 50, ("offsets.topic.replication.factor", 3), {
        "cleanup.policy": "compact", "compression.type": "producer",
        "segment.bytes": ("offsets.topic.segment.bytes", 104_857_600)}),
    topic_names.TRANSACTION_STATE_TOPIC: ("transaction.state.log.num.partitions", 50,
                                          ("transaction.state.log.replication.factor", 3), {
        "cleanup.policy": "compact", "compression.type": "uncompressed",
        "segment.bytes": ("transaction.state.log.segment.bytes", 104_857_600),
        "min.insync.replicas": ("transaction.state.log.min.isr", 2)}),
    topic_names.SHARE_GROUP_STATE_TOPIC: ("share.coordinator.state.topic.num.partitions", 50,
                                          ("share.coordinator.state.topic.replication.factor", 3), {
        "cleanup.policy": "delete",
        "segment.bytes": ("share.coordinator.state.topic.segment.bytes", 104_857_600)}),
}

Topic = MetadataResponse.MetadataResponseTopic
Partition = MetadataResponse.MetadataResponsePartition
log = logging.getLogger(__name__)


async def handle(ctx: RequestContext, request) -> MetadataResponse:
    version = ctx.api_version
    if _uses_ids_too_early(request, version):
        return _invalid_request_response(request)
    broker = ctx.broker
    answer = _requested_topics(ctx, request, version)
    if version >= 8 and request.include_topic_authorized_operations:
        for topic in answer.shown:
            topic.topic_authorized_operations = ctx.authorized_operations(ResourceType.TOPIC, topic.name)
    cluster_operations = AUTHORIZED_OPERATIONS_OMITTED
    if 8 <= version <= 10 and request.include_cluster_authorized_operations:
        cluster_operations = _cluster_operations(ctx)
    return MetadataResponse(brokers=_brokers(ctx), cluster_id=broker.cluster_id, controller_id=broker.node_id,
                            topics=answer.unknown_ids + answer.shown + answer.refused,
                            cluster_authorized_operations=cluster_operations)


class _Answer(NamedTuple):
    """The topics of the response, in Kafka's order; only those `shown` report their authorized operations."""
    unknown_ids: list
    shown: list
    refused: list


def _cluster_operations(ctx: RequestContext) -> int:
    if not ctx.authorize(AclOperation.DESCRIBE, ResourceType.CLUSTER, CLUSTER_NAME):
        return 0
    return ctx.authorized_operations(ResourceType.CLUSTER, CLUSTER_NAME)


def _brokers(ctx: RequestContext) -> list:
    """The live nodes with their endpoints on this listener (KRaftMetadataCache.getAliveBrokerNodes)."""
    broker = ctx.broker
    nodes = broker.metadata.nodes
    brokers = []
    for node_id in broker.alive_node_ids():
        address = broker.endpoint_of(node_id, ctx.listener_host, ctx.listener_port)
        if address is not None:  # a node that has never listened has no endpoint to give
            brokers.append(MetadataResponse.MetadataResponseBroker(node_id=node_id, host=address[0],
                                                                   port=address[1], rack=nodes[node_id].rack))
    return brokers


def _uses_ids_too_early(request, version: int) -> bool:
    """Versions 10 and 11 have the topic id field but Kafka refuses requests that use it."""
    if version >= 12 or not request.topics:
        return False
    return any(topic.name is None or topic.topic_id != ZERO_UUID for topic in request.topics)


def _invalid_request_response(request) -> MetadataResponse:
    """Kafka's answer to a request it cannot serve: every listed topic with the error, nothing else."""
    topics = [Topic(error_code=ErrorCode.INVALID_REQUEST, name=topic.name or "", topic_id=topic.topic_id,
                    partitions=[]) for topic in request.topics]
    return MetadataResponse(brokers=[], cluster_id=None, controller_id=-1, topics=topics)


def _requested_topics(ctx: RequestContext, request, version: int) -> _Answer:
    broker = ctx.broker
    wanted = request.topics
    if wanted is None or (version == 0 and not wanted):
        topics = sorted(broker.topics().items())
        visible = ctx.filter_authorized(AclOperation.DESCRIBE, ResourceType.TOPIC, [name for name, _ in topics],
                                        log_if_denied=False)
        return _Answer([], [_describe(broker, info, version) for name, info in topics if name in visible], [])
    ids = list(dict.fromkeys(topic.topic_id for topic in wanted if topic.topic_id != ZERO_UUID))
    if ids:
        return _topics_by_id(ctx, ids)
    names = list(dict.fromkeys(topic.name for topic in wanted if topic.name is not None))
    visible = ctx.filter_authorized(AclOperation.DESCRIBE, ResourceType.TOPIC, names)
    allow_creation = _auto_creation_allowed(broker, request, version)
    not_creatable = _refused_creation(ctx, [name for name in names if name in visible], allow_creation)
    shown = [_topic_by_name(ctx, name, allow_creation) for name in names
             if name in visible and name not in not_creatable]
    refused = ([_refused(name, is_internal=topic_names.is_internal(name)) for name in not_creatable]
               + [_refused(name) for name in names if name not in visible])
    return _Answer([], shown, refused)


def _refused_creation(ctx: RequestContext, names: list[str], allow_creation: bool) -> list[str]:
    """The missing topics among `names` that would be auto-created but that the principal may not CREATE: Kafka
    asks for CREATE on the cluster (not logged when refused), else on each topic."""
    missing = [name for name in names if ctx.broker.topic(name) is None] if allow_creation else []
    if not missing or ctx.authorize(AclOperation.CREATE, ResourceType.CLUSTER, CLUSTER_NAME, log_if_denied=False):
        return []
    creatable = ctx.filter_authorized(AclOperation.CREATE, ResourceType.TOPIC, missing)
    return [name for name in missing if name not in creatable]


def _refused(name: str | None, *, topic_id: uuid.UUID = ZERO_UUID, is_internal: bool = False):
    """A topic the principal may not see or create: no partitions, and no id unless it was asked by id."""
    return Topic(error_code=ErrorCode.TOPIC_AUTHORIZATION_FAILED, name=name, topic_id=topic_id,
                 is_internal=is_internal, partitions=[])


def _topics_by_id(ctx: RequestContext, ids: list[uuid.UUID]) -> _Answer:
    broker = ctx.broker
    unknown, known = [], []
    for topic_id in ids:
        info = broker.topic_by_id(topic_id)
        if info is None:
            unknown.append(Topic(error_code=ErrorCode.UNKNOWN_TOPIC_ID, name=None, topic_id=topic_id,
                                 partitions=[]))
        else:
            known.append(info)
    visible = ctx.filter_authorized(AclOperation.DESCRIBE, ResourceType.TOPIC, [info.name for info in known])
    shown = [_describe(broker, info, version=12) for info in known if info.name in visible]  # ids: v12+
    # Topic ids are not secret: Kafka names the refused one by its id.
    refused = [_refused(None, topic_id=info.topic_id) for info in known if info.name not in visible]
    return _Answer(unknown, shown, refused)


def _auto_creation_allowed(broker, request, version: int) -> bool:
    requested = version < 4 or request.allow_auto_topic_creation  # v0-3 cannot say no
    return bool(requested and broker.config.auto_create_topics_enable)


def _topic_by_name(ctx: RequestContext, name: str, allow_creation: bool):
    broker = ctx.broker
    info = broker.topic(name)
    if info is not None:
        return _describe(broker, info, ctx.api_version)
    if not topic_names.is_valid(name):
        return _missing(name, ErrorCode.INVALID_TOPIC_EXCEPTION)
    if not allow_creation:
        return _missing(name, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
    if topic_names.find_collision(name, broker.topics()) is not None:
        return _missing(name, ErrorCode.INVALID_TOPIC_EXCEPTION)
    return _missing(name, _auto_create(ctx, name))


def _auto_create(ctx: RequestContext, name: str) -> ErrorCode:
    """Create `name` and return the error to answer for it this time (LEADER_NOT_AVAILABLE, as for a topic whose
    partitions are still being set up)."""
    broker = ctx.broker
    partitions, replication_factor, configs = _creation_settings(broker, name)
    try:
        broker.create_topic(name, partitions, configs, replication_factor=replication_factor)
    except ControllerError as exc:
        log.warning("client %s: could not auto-create topic %r: %s: %s", ctx.client_id, name, exc.code.name,
                    exc.message)
        return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    except (OSError, ValueError, StorageError) as exc:
        log.warning("client %s: could not auto-create topic %r: %s", ctx.client_id, name, exc)
        return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    log.info("client %s: auto-created topic %r with %d partitions, replication factor %d", ctx.client_id, name,
             partitions, replication_factor)
    return ErrorCode.LEADER_NOT_AVAILABLE


def _creation_settings(broker, name: str) -> tuple[int, int, dict]:
    """(partitions, replication factor, topic configs) of an auto-created topic."""
    config = broker.config
    spec = _INTERNAL_TOPIC_SPECS.get(name)
    if spec is None:
        return config.num_partitions, config.default_replication_factor, {}
    count_setting, count_default, factor_setting, template = spec
    configs = {}
    for key, value in template.items():
        configs[key] = str(_setting(config, *value)) if isinstance(value, tuple) else value
    # as the coordinators create them: at most as many replicas as there are live nodes
    replication_factor = min(int(_setting(config, *factor_setting)), max(len(broker.alive_node_ids()), 1))
    if "min.insync.replicas" in configs:
        configs["min.insync.replicas"] = str(min(int(configs["min.insync.replicas"]), replication_factor))
    return int(_setting(config, count_setting, count_default)), replication_factor, configs


def _setting(config, name: str, default):
    """A broker setting by Kafka name (an attribute in snake case), or Kafka's default when the config lacks it."""
    value = getattr(config, name.replace(".", "_"), None)
    return default if value is None else value


def _missing(name: str, error: ErrorCode):
    return Topic(error_code=error, name=name, topic_id=ZERO_UUID, is_internal=topic_names.is_internal(name),
                 partitions=[])


def _describe(broker, info, version: int):
    """A topic's partitions as KRaftMetadataCache.getPartitionMetadata describes them."""
    alive = set(broker.alive_node_ids())
    partitions = []
    for state in broker.metadata.partitions(info.name):
        replicas, isr = list(state.replicas), list(state.isr)
        if version == 0:  # errorUnavailableEndpoints: only live replicas are listed
            replicas = [node_id for node_id in replicas if node_id in alive]
            isr = [node_id for node_id in isr if node_id in alive]
        if state.leader == NO_LEADER or state.leader not in alive:
            error, leader = ErrorCode.LEADER_NOT_AVAILABLE, NO_LEADER
        elif len(replicas) < len(state.replicas) or len(isr) < len(state.isr):
            error, leader = ErrorCode.REPLICA_NOT_AVAILABLE, state.leader
        else:
            error, leader = ErrorCode.NONE, state.leader
        partitions.append(Partition(error_code=error, partition_index=state.partition, leader_id=leader,
                                    leader_epoch=state.leader_epoch, replica_nodes=replicas, isr_nodes=isr,
                                    offline_replicas=state.offline_replicas(alive)))
    return Topic(error_code=ErrorCode.NONE, name=info.name, topic_id=info.topic_id,
                 is_internal=info.is_internal, partitions=partitions)

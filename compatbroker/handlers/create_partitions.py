"""CreatePartitions (API key 37), versions 0-3: grow topics to a new partition count.

Behaviour, as Kafka's controller (KRaft) decides, topic by topic:
- A name given twice answers INVALID_REQUEST ("Duplicate topic name.") once and grows nothing. Then
  authorization: a topic the principal may not ALTER answers TOPIC_AUTHORIZATION_FAILED (no message) whether or
  not it exists, and is left alone. An unknown topic answers UNKNOWN_TOPIC_OR_PARTITION (no message).
- A count equal to or below the current one answers INVALID_PARTITIONS. Assignments, when given, must hold one
  replica list per new partition, each checked as CreateTopics checks them, of the topic's replication factor (its
  first partition's replica count); otherwise INVALID_REPLICA_ASSIGNMENT. Without assignments the controller places
  the new partitions as it places a new topic's.
- One request may add at most 10,000 partitions, counted in request order over the topics that pass their checks
  (Kafka's controller collects one record per new partition in a list bounded by MAX_RECORDS_PER_USER_OP,
  10,000). The topic whose new partitions would go past the bound, and every later topic that would add any,
  answer UNKNOWN_SERVER_ERROR with no message, as Kafka answers its BoundedListTooLongException (CreatePartitions
  has no POLICY_VIOLATION check of its own, unlike CreateTopics); the topics before it are grown.
- A topic is grown all or nothing: when storage fails halfway (EMFILE, ENOSPC, ...), the partitions made are
  removed, the topic keeps its count, and it answers UNKNOWN_SERVER_ERROR without a message (Kafka's ApiError for
  an unexpected exception; the cause goes to the log, one WARNING line).
- `validate_only` runs the checks, the controller's placement included, and changes nothing. Otherwise the new
  partitions start empty at once on the nodes that host them (`Broker.add_partitions`), and Metadata reports them:
  a consumer group's leader notices the new count on its next metadata refresh and rejoins, and the group's next
  assignment includes them.
- Error messages are Kafka's. Results list duplicates first, then the other topics in request order.

Deviations: `timeout_ms` is not used (the change is synchronous). Kafka keeps the records the crossing topic added
before its list overflowed (so it grows partly); here it grows not at all.
"""
from __future__ import annotations

import logging
from collections import Counter
from typing import TYPE_CHECKING

from ..cluster.controller import ControllerError
from ..protocol.error_codes import ErrorCode
from ..protocol.messages import CreatePartitionsResponse
from ..security.acls.types import AclOperation, ResourceType
from ..storage import StorageError
from .create_topics import Refused, check_replicas

if TYPE_CHECKING:
    from . import RequestContext

API_KEY = 37
MIN_VERSION = 0
MAX_VERSION = 3

MAX_RECORDS_PER_USER_OP = 10_000  # Kafka's QuorumController: records (here: new partitions) one request may add
Result = CreatePartitionsResponse.CreatePartitionsTopicResult
log = logging.getLogger(__name__)


async def handle(ctx: RequestContext, request) -> CreatePartitionsResponse:
    counts = Counter(topic.name for topic in request.topics)
    results = [Result(name=name, error_code=ErrorCode.INVALID_REQUEST, error_message="Duplicate topic name.")
               for name, count in counts.items() if count > 1]
    alterable = ctx.filter_authorized(AclOperation.ALTER, ResourceType.TOPIC,
                                      [name for name, count in counts.items() if count == 1])
    budget = _Budget(MAX_RECORDS_PER_USER_OP)
    for topic in request.topics:
        if counts[topic.name] > 1:
            continue
        if topic.name not in alterable:
            results.append(Result(name=topic.name, error_code=ErrorCode.TOPIC_AUTHORIZATION_FAILED,
                                  error_message=None))
        else:
            results.append(_grow(ctx.broker, topic, request.validate_only, budget))
    return CreatePartitionsResponse(throttle_time_ms=0, results=results)


class _Budget:
    """New partitions the request may still add; once overdrawn, every later addition fails too (Kafka's full
    record list)."""

    def __init__(self, left: int):
        self.left = left

    def take(self, name: str, wanted: int) -> None:
        if wanted > self.left:
            self.left = 0
            log.warning("CreatePartitions: adding %d partition(s) to topic %s goes past the %d new partitions one "
                        "request may add", wanted, name, MAX_RECORDS_PER_USER_OP)
            raise Refused(ErrorCode.UNKNOWN_SERVER_ERROR, None)
        self.left -= wanted


def _grow(broker, topic, validate_only: bool, budget: _Budget):
    try:
        additional = _check(broker, topic)
        budget.take(topic.name, additional)
        assignment = None if topic.assignments is None else [list(entry.broker_ids) for entry in topic.assignments]
        if validate_only:  # the controller places the partitions (or refuses to); nothing is kept
            broker.controller.plan_partitions(topic.name, topic.count, assignment=assignment)
        else:
            broker.add_partitions(topic.name, topic.count, assignment=assignment)
    except ControllerError as refused:
        return Result(name=topic.name, error_code=refused.code, error_message=refused.message)
    except Refused as refused:
        return Result(name=topic.name, error_code=refused.error_code, error_message=refused.message)
    except (OSError, StorageError) as exc:  # expected under resource exhaustion: the topic keeps its count
        log.warning("adding partitions to topic %s failed, nothing added: %s", topic.name, exc)
        return Result(name=topic.name, error_code=ErrorCode.UNKNOWN_SERVER_ERROR, error_message=None)
    return Result(name=topic.name, error_code=ErrorCode.NONE, error_message=None)


def _check(broker, topic) -> int:
    """Kafka's checks of one topic; returns how many partitions it adds."""
    info = broker.topic(topic.name)
    if info is None:
        raise Refused(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, None)
    if topic.count == info.partitions:
        raise Refused(ErrorCode.INVALID_PARTITIONS, f"Topic already has {info.partitions} partition(s).")
    if topic.count < info.partitions:
        raise Refused(ErrorCode.INVALID_PARTITIONS, f"The topic {topic.name} currently has {info.partitions} "
                                                    f"partition(s); {topic.count} would not be an increase.")
    additional = topic.count - info.partitions
    if topic.assignments is None:
        return additional
    if len(topic.assignments) != additional:
        raise Refused(ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                      f"Attempted to add {additional} additional partition(s), but only {len(topic.assignments)} "
                      "assignment(s) were specified.")
    replication_factor = len(broker.partition_state(topic.name, 0).replicas)
    for offset, assignment in enumerate(topic.assignments):
        check_replicas(broker, assignment.broker_ids, replication_factor, info.partitions + offset)
    return additional

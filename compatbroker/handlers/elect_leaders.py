"""ElectLeaders (API key 43), versions 0-2: preferred and unclean leader elections, decided by the controller.

Behaviour, as Kafka's KRaft controller answers (any node takes the request; a broker forwards it to the controller):
- Authorization first, as Kafka's controller: ALTER on the cluster, else CLUSTER_AUTHORIZATION_FAILED at the top
  (v1+) and on every partition asked for, and nothing is elected.
- Election type (v1+; v0 is always preferred): 0 PREFERRED makes the first replica of the assignment leader if it
  is alive and in the ISR; 1 UNCLEAN gives a leaderless partition the first alive replica even if out of sync
  (`Controller.elect_leader` applies the rules). Any other type refuses the request: INVALID_REQUEST at the top
  (v1+) and on every partition asked for.
- Per partition: 0 with a null message when the leader changed; ELECTION_NOT_NEEDED when the preferred replica
  already leads (preferred) or the partition has a leader (unclean); PREFERRED_LEADER_NOT_AVAILABLE or
  ELIGIBLE_LEADERS_NOT_AVAILABLE when no replica qualifies; UNKNOWN_TOPIC_OR_PARTITION for a topic or partition
  the cluster does not have. Errors carry a message.
- `topic_partitions` null means every partition of the cluster: every topic gets an entry (topics by name), listing
  only the partitions whose election was not ELECTION_NOT_NEEDED, as Kafka does.
- The election is decided before the answer, so `timeout_ms` is never reached.
"""
from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from ..cluster.controller import PREFERRED, UNCLEAN, ControllerError
from ..protocol.error_codes import ErrorCode
from ..protocol.messages import ElectLeadersResponse
from ..security.acls.types import CLUSTER_NAME, AclOperation, ResourceType

if TYPE_CHECKING:
    from . import RequestContext

API_KEY = 43
MIN_VERSION = 0
MAX_VERSION = 2

TopicResult = ElectLeadersResponse.ReplicaElectionResult
PartitionResult = ElectLeadersResponse.PartitionResult
log = logging.getLogger(__name__)


async def handle(ctx: RequestContext, request) -> ElectLeadersResponse:
    if not ctx.authorize(AclOperation.ALTER, ResourceType.CLUSTER, CLUSTER_NAME):
        denied = ErrorCode.CLUSTER_AUTHORIZATION_FAILED
        return _refused(request, denied, denied.message, ctx.api_version)
    election = request.election_type if ctx.api_version >= 1 else PREFERRED
    if election not in (PREFERRED, UNCLEAN):
        log.info("client %s: ElectLeaders refused: unknown election type %d", ctx.client_id, election)
        return _refused(request, ErrorCode.INVALID_REQUEST, f"Unknown election type {election}", ctx.api_version)
    if request.topic_partitions is None:
        results = [_elect_all(ctx.broker, topic, election) for topic in sorted(ctx.broker.topics())]
    else:
        results = [TopicResult(topic=wanted.topic,
                               partition_result=[_elect(ctx.broker, wanted.topic, partition, election)
                                                 for partition in wanted.partitions])
                   for wanted in request.topic_partitions]
    return ElectLeadersResponse(throttle_time_ms=0, error_code=ErrorCode.NONE, replica_election_results=results)


def _elect_all(broker, topic: str, election: int):
    # Kafka leaves out the partitions that needed no election when asked for all of them
    results = [_elect(broker, topic, state.partition, election) for state in broker.metadata.partitions(topic)]
    return TopicResult(topic=topic, partition_result=[result for result in results
                                                      if result.error_code != ErrorCode.ELECTION_NOT_NEEDED])


def _elect(broker, topic: str, partition: int, election: int):
    if broker.partition_state(topic, partition) is None:
        return _result(partition, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                       f"No such partition as {topic}-{partition}" if broker.topic(topic) else
                       f"No such topic as {topic}")
    try:
        broker.controller.elect_leader(topic, partition, election)
    except ControllerError as exc:
        return _result(partition, exc.code, exc.message)
    return _result(partition, ErrorCode.NONE, None)


def _result(partition: int, code: int, message: str | None):
    return PartitionResult(partition_id=partition, error_code=code, error_message=message)


def _refused(request, code: ErrorCode, message: str, version: int) -> ElectLeadersResponse:
    """The request's error on every partition asked for, and at the top from v1 (v0 has no top-level error)."""
    results = [TopicResult(topic=wanted.topic, partition_result=[_result(p, code, message) for p in wanted.partitions])
               for wanted in request.topic_partitions or ()]
    return ElectLeadersResponse(throttle_time_ms=0, error_code=code if version >= 1 else ErrorCode.NONE,
                                replica_election_results=results)

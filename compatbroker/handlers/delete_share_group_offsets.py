"""DeleteShareGroupOffsets (API key 92), version 0: delete the share-partition state of whole topics for an Empty
share group (the admin client's `deleteShareGroupOffsets`); the group then reads them again from
`share.auto.offset.reset` should it subscribe to them.

As Kafka 4.2's KafkaApis and group coordinator answer:
- DELETE on the group, else GROUP_AUTHORIZATION_FAILED alone;
- per topic: READ on it, else TOPIC_AUTHORIZATION_FAILED for the topic;
- group-level errors, answered alone: INVALID_GROUP_ID (empty id), NOT_COORDINATOR /
  COORDINATOR_LOAD_IN_PROGRESS, GROUP_ID_NOT_FOUND (no such group, or not a share group), NON_EMPTY_GROUP (any
  member, whatever it subscribes to);
- per remaining topic: UNKNOWN_TOPIC_OR_PARTITION for a topic the cluster does not have or whose state the group
  never initialized ("There is no offset information to delete."), else its state is deleted (the topic is
  "deleting" for the group until that is done), and a failure to delete is the topic's error. A group that never
  initialized any share state answers no topics at all, as Kafka does.
"""
from __future__ import annotations

import uuid
from typing import TYPE_CHECKING

from ..coordinator import coordinator_of
from ..coordinator.offsets import OffsetWriteError
from ..coordinator.share_group import delete_share_state
from ..protocol.error_codes import ErrorCode
from ..protocol.messages import DeleteShareGroupOffsetsResponse
from ..security.acls.types import AclOperation, ResourceType

if TYPE_CHECKING:
    from . import RequestContext

API_KEY = 92
MIN_VERSION = 0
MAX_VERSION = 0

Response = DeleteShareGroupOffsetsResponse
TopicAnswer = Response.DeleteShareGroupOffsetsResponseTopic

ZERO_UUID = uuid.UUID(int=0)
NO_OFFSETS = "There is no offset information to delete."


async def handle(ctx: RequestContext, request) -> DeleteShareGroupOffsetsResponse:
    group_id = request.group_id
    if not ctx.authorize(AclOperation.DELETE, ResourceType.GROUP, group_id):
        return _refused(ErrorCode.GROUP_AUTHORIZATION_FAILED)
    readable = ctx.filter_authorized(AclOperation.READ, ResourceType.TOPIC, [t.topic_name for t in request.topics])
    denied = [TopicAnswer(topic_name=t.topic_name, topic_id=ZERO_UUID,
                          error_code=ErrorCode.TOPIC_AUTHORIZATION_FAILED,
                          error_message=ErrorCode.TOPIC_AUTHORIZATION_FAILED.message)
              for t in request.topics if t.topic_name not in readable]
    coordinator = coordinator_of(ctx.broker)
    group, error, message = coordinator.share_groups.empty_group(group_id)
    if group is None:
        return _refused(error, message)
    wanted = list(dict.fromkeys(t.topic_name for t in request.topics if t.topic_name in readable))
    try:
        answers = await _delete(ctx, coordinator, group, wanted)
    except OffsetWriteError as exc:
        return _refused(exc.error_code)
    return Response(responses=denied + answers)


async def _delete(ctx: RequestContext, coordinator, group, names: list[str]) -> list:
    if not group.initialized_topics and not group.deleting_topics:
        return []  # Kafka: no share state metadata, nothing answered
    topics = ctx.broker.topics()
    initialized, deleting = dict(group.initialized_topics), dict(group.deleting_topics)
    targets, errors = {}, []
    for name in names:
        topic = topics.get(name)
        if topic is not None and topic.topic_id in initialized:
            targets[topic.topic_id] = (name, sorted(initialized.pop(topic.topic_id).partitions))
            deleting[topic.topic_id] = name
        elif topic is not None and topic.topic_id in deleting:
            targets[topic.topic_id] = (name, list(range(topic.partitions)))  # retry a deletion left unfinished
        else:
            errors.append(TopicAnswer(topic_name=name, topic_id=ZERO_UUID,
                                      error_code=ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                                      error_message=NO_OFFSETS if topic is not None
                                      else ErrorCode.UNKNOWN_TOPIC_OR_PARTITION.message))
    if not targets:
        return errors
    share_groups = coordinator.share_groups
    await share_groups.record_state(group, initialized, deleting)
    outcome = await delete_share_state(ctx.broker, group.group_id,
                                       [(topic_id, p) for topic_id, (_, parts) in targets.items() for p in parts])
    done = []
    for topic_id, (name, partitions) in targets.items():
        failed = next((outcome[(topic_id, p)] for p in partitions if outcome[(topic_id, p)] is not ErrorCode.NONE),
                      None)
        if failed is None:
            done.append(TopicAnswer(topic_name=name, topic_id=topic_id))
            deleting.pop(topic_id, None)
        else:
            errors.append(TopicAnswer(topic_name=name, topic_id=topic_id, error_code=failed,
                                      error_message=failed.message))
    if done:
        await share_groups.record_state(group, initialized, deleting)
    return done + errors


def _refused(error: ErrorCode, message: str | None = None) -> DeleteShareGroupOffsetsResponse:
    return Response(error_code=error, error_message=message or error.message)

"""DeleteTopics (API key 20), versions 0-6: delete topics named by name (v0-5) or by name or topic id (v6).

Behaviour, as Kafka's controller (KRaft) decides:
- v6 entries must name a topic by exactly one of name and id: neither, or both, answers INVALID_REQUEST. A name (or
  an id) listed twice answers INVALID_REQUEST once and is not deleted; so does a name whose topic is also listed by
  its id.
- Authorization, as Kafka's controller, after those checks: DELETE on the cluster allows every topic; otherwise a
  topic needs DELETE on itself (and DESCRIBE to learn more than that). A name the principal may not DESCRIBE
  answers TOPIC_AUTHORIZATION_FAILED whether or not the topic exists; one it may describe but not delete answers
  TOPIC_AUTHORIZATION_FAILED too. An id is resolved first (an unknown id answers UNKNOWN_TOPIC_ID): one the
  principal may not delete answers TOPIC_AUTHORIZATION_FAILED, with the topic's name only if it may DESCRIBE it.
  A denied topic is left alone.
- An unknown name answers UNKNOWN_TOPIC_OR_PARTITION, an unknown id UNKNOWN_TOPIC_ID (with a null name).
- A deleted topic answers its name and, from v6, its id. Deletion goes through `Broker.delete_topic`: the partition
  directories are renamed `...-delete` and removed, Produce, Fetch and ListOffsets answer the topic as unknown at
  once, long polls on it return, and groups' committed offsets of its partitions get tombstones. A topic created
  again under the same name gets a new id and starts empty.
- Each topic is answered on its own: a storage failure while deleting one (its directories cannot be renamed)
  answers UNKNOWN_SERVER_ERROR for it, logged as one WARNING line, and the other topics are still deleted. Several
  requests deleting at once share the checkpoint writes (`Broker.checkpoint`).
- Error messages (v5+) are Kafka's.

Deviations: Kafka lets an admin client delete the internal topics; here `__consumer_offsets` and the other internal
topics answer INVALID_TOPIC_EXCEPTION, because the group coordinator keeps its state in them while it runs (Kafka's
own tools refuse such deletions on the client side). `timeout_ms` is not used (deletion is synchronous). Results
keep the request's order, where Kafka shuffles them; a name that maps to an id listed too answers INVALID_REQUEST on
both entries (Kafka answers only the name's).
"""
from __future__ import annotations

import asyncio
import logging
import uuid
from collections import Counter
from dataclasses import dataclass
from typing import TYPE_CHECKING

from .. import topic_names
from ..protocol.error_codes import ErrorCode
from ..protocol.messages import DeleteTopicsResponse
from ..protocol.wire import ZERO_UUID
from ..security.acls.types import CLUSTER_NAME, AclOperation, ResourceType
from ..storage import StorageError

if TYPE_CHECKING:
    from . import RequestContext

API_KEY = 20
MIN_VERSION = 0
MAX_VERSION = 6

Result = DeleteTopicsResponse.DeletableTopicResult
log = logging.getLogger(__name__)
REPEATED = object()  # a later mention of a duplicated name or id: answered at its first mention


@dataclass(frozen=True)
class _Delete:
    name: str


async def handle(ctx: RequestContext, request) -> DeleteTopicsResponse:
    broker = ctx.broker
    entries = _entries(request, ctx.api_version)
    # What each entry comes to: None until decided, then a Result, a _Delete, or REPEATED.
    slots: list = [None] * len(entries)
    _refuse_malformed(entries, slots)
    _resolve(ctx, entries, slots)
    # Concurrently, in request order: every topic leaves before the first checkpoint, so they share its writes.
    deleting = [index for index, slot in enumerate(slots) if isinstance(slot, _Delete)]
    answers = await asyncio.gather(*(_delete(broker, slots[index].name) for index in deleting))
    for index, answer in zip(deleting, answers, strict=True):
        slots[index] = answer
    return DeleteTopicsResponse(throttle_time_ms=0, responses=[slot for slot in slots if slot is not REPEATED])


async def _delete(broker, name: str):
    try:
        info = await broker.delete_topic(name)
    except (OSError, StorageError) as exc:  # this topic's answer; the request's other topics go on
        log.warning("deleting topic %s failed: %s", name, exc)
        return _error(name, ZERO_UUID, ErrorCode.UNKNOWN_SERVER_ERROR)
    if info is None:  # deleted meanwhile by another request
        return _error(name, ZERO_UUID, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
    return Result(name=name, topic_id=info.topic_id, error_code=ErrorCode.NONE, error_message=None)


def _entries(request, version: int) -> list[tuple[str | None, uuid.UUID]]:
    """(name, topic id) of every entry, in request order."""
    if version < 6:
        return [(name, ZERO_UUID) for name in request.topic_names]
    return [(topic.name, topic.topic_id) for topic in request.topics]


def _error(name: str | None, topic_id: uuid.UUID, code: ErrorCode, message: str | None = None):
    return Result(name=name, topic_id=topic_id, error_code=code, error_message=message or code.message)


def _refuse_malformed(entries: list, slots: list) -> None:
    """Answer the entries that name no topic, name it twice over, or repeat an earlier entry."""
    names = Counter(name for name, topic_id in entries if name is not None and topic_id == ZERO_UUID)
    ids = Counter(topic_id for name, topic_id in entries if name is None and topic_id != ZERO_UUID)
    answered: set = set()
    for index, (name, topic_id) in enumerate(entries):
        if name is None and topic_id == ZERO_UUID:
            slots[index] = _error(None, ZERO_UUID, ErrorCode.INVALID_REQUEST,
                                  "Neither topic name nor id were specified.")
        elif name is not None and topic_id != ZERO_UUID:
            slots[index] = _error(name, topic_id, ErrorCode.INVALID_REQUEST,
                                  "You may not specify both topic name and topic id.")
        elif names[name] > 1 or ids[topic_id] > 1:
            key = name if name is not None else topic_id
            slots[index] = REPEATED
            if key not in answered:
                answered.add(key)
                what = "name" if name is not None else "id"
                slots[index] = _error(name, topic_id, ErrorCode.INVALID_REQUEST, f"Duplicate topic {what}.")


def _resolve(ctx: RequestContext, entries: list, slots: list) -> None:
    """Turn each remaining entry into the name of the topic to delete, or into its error."""
    broker = ctx.broker
    infos = {index: broker.topic(name) if name is not None else broker.topic_by_id(topic_id)
             for index, (name, topic_id) in enumerate(entries) if slots[index] is None}
    named = {entries[index][0] if entries[index][0] is not None else info.name
             for index, info in infos.items() if entries[index][0] is not None or info is not None}
    describable, deletable = _authorized(ctx, named)
    by_id: dict[uuid.UUID, int] = {}  # topic id -> index of the entry naming it (by id or by name)
    for index, (name, topic_id) in enumerate(entries):
        if slots[index] is not None:
            continue
        info = infos[index]
        if name is not None and name not in describable:  # the principal may not learn whether it exists
            slots[index] = _error(name, ZERO_UUID, ErrorCode.TOPIC_AUTHORIZATION_FAILED)
        elif info is not None and info.name not in deletable:
            shown = info.name if info.name in describable else None
            slots[index] = _error(shown, ZERO_UUID if name is not None else topic_id,
                                  ErrorCode.TOPIC_AUTHORIZATION_FAILED)
        elif info is None:
            slots[index] = (_error(name, ZERO_UUID, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION) if name is not None
                            else _error(None, topic_id, ErrorCode.UNKNOWN_TOPIC_ID))
        elif topic_names.is_internal(info.name):
            slots[index] = _error(info.name, info.topic_id, ErrorCode.INVALID_TOPIC_EXCEPTION,
                                  f"Topic {info.name} is an internal topic of the broker and cannot be deleted.")
        elif info.topic_id in by_id:
            message = "The provided topic name maps to an ID that was already supplied."
            for clash in (by_id[info.topic_id], index):
                slots[clash] = _error(info.name, info.topic_id, ErrorCode.INVALID_REQUEST, message)
        else:
            by_id[info.topic_id] = index
            slots[index] = _Delete(info.name)


def _authorized(ctx: RequestContext, names: set[str]) -> tuple[set[str], set[str]]:
    """(describable, deletable) among `names`: everything with DELETE on the cluster (its denial not logged: the
    topic checks follow)."""
    if ctx.authorize(AclOperation.DELETE, ResourceType.CLUSTER, CLUSTER_NAME, log_if_denied=False):
        return names, names
    return (ctx.filter_authorized(AclOperation.DESCRIBE, ResourceType.TOPIC, names),
            ctx.filter_authorized(AclOperation.DELETE, ResourceType.TOPIC, names))

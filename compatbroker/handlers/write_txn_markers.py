"""WriteTxnMarkers (API key 27), versions 0-2: write transaction markers (control batches) to partitions.

In Kafka the transaction coordinator sends this to partition leaders to complete a transaction; this broker's
coordinator writes its markers on the leader nodes itself (`compatbroker.coordinator.transactions.markers`), and
this handler serves the same path (`write_markers_here`, on this node) for tools and tests that send the request.

Behaviour, as Kafka's: each marker appends one COMMIT or ABORT control batch, with the marker's producer id and
epoch and coordinator epoch, to every listed partition, and a marker in a `__consumer_offsets` partition completes
the transactional offset commits of that producer there (made visible or dropped). The answer comes once every
marker is written, durable under the flush policy and, with several replicas, in every in-sync replica (acks=-1).
Per partition: NONE, UNKNOWN_TOPIC_OR_PARTITION for a partition that does not exist, NOT_LEADER_OR_FOLLOWER for
one this node does not lead, NOT_ENOUGH_REPLICAS (or the replication wait's error) when the ISR is too small,
INVALID_PRODUCER_EPOCH for a producer epoch older than the partition's producer's, TRANSACTION_COORDINATOR_FENCED
for a coordinator epoch older than the partition's last marker's, and KAFKA_STORAGE_ERROR when the disk refuses
the append. A marker for a producer without an open transaction on the partition is written all the same, as
Kafka writes it (it completes nothing).

Authorization: the request needs ALTER on the cluster (not logged when refused) or CLUSTER_ACTION on it (what
brokers hold); otherwise every listed partition answers CLUSTER_AUTHORIZATION_FAILED and nothing is written.

Versions 0 and 1 differ only in their encoding (Kafka 3.9 serves both; 4.0 removed v0, KIP-896, so `--emulate 4.0`
and later do not offer it). Version 2 (KIP-1228) adds the marker's `transaction_version`; this broker accepts it
and needs nothing from it, since storage checks a marker's producer epoch the same way for both transaction
versions (an epoch bumped by transactions v2 is newer, never older).

Deviation: Kafka merges the results of markers that share a producer id (its response is a map by producer id);
this broker answers one result per marker, in the order asked.
"""
from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

from ..coordinator.transactions.markers import write_markers_here
from ..protocol.error_codes import ErrorCode
from ..protocol.messages import WriteTxnMarkersResponse
from ..security.acls.types import CLUSTER_NAME, AclOperation, ResourceType

if TYPE_CHECKING:
    from . import RequestContext

API_KEY = 27
MIN_VERSION = 0
MAX_VERSION = 2

MarkerResult = WriteTxnMarkersResponse.WritableTxnMarkerResult
TopicResult = WriteTxnMarkersResponse.WritableTxnMarkerTopicResult
PartitionResult = WriteTxnMarkersResponse.WritableTxnMarkerPartitionResult


async def handle(ctx: RequestContext, request) -> WriteTxnMarkersResponse:
    if not _authorized(ctx):
        return WriteTxnMarkersResponse(markers=[_refused(marker) for marker in request.markers])
    results = await asyncio.gather(*(_write(ctx, marker) for marker in request.markers))
    return WriteTxnMarkersResponse(markers=list(results))


def _authorized(ctx: RequestContext) -> bool:
    return (ctx.authorize(AclOperation.ALTER, ResourceType.CLUSTER, CLUSTER_NAME, log_if_denied=False)
            or ctx.authorize(AclOperation.CLUSTER_ACTION, ResourceType.CLUSTER, CLUSTER_NAME))


def _partitions(marker) -> list[tuple[str, int]]:
    return list(dict.fromkeys((topic.name, index) for topic in marker.topics for index in topic.partition_indexes))


def _refused(marker):
    partitions = _partitions(marker)
    return _result(marker, partitions, dict.fromkeys(partitions, ErrorCode.CLUSTER_AUTHORIZATION_FAILED))


async def _write(ctx: RequestContext, marker):
    partitions = _partitions(marker)
    codes = await write_markers_here(ctx.broker, producer_id=marker.producer_id, producer_epoch=marker.producer_epoch,
                                coordinator_epoch=marker.coordinator_epoch, commit=marker.transaction_result,
                                partitions=partitions)
    return _result(marker, partitions, codes)


def _result(marker, partitions: list[tuple[str, int]], codes):
    by_topic: dict[str, list] = {}
    for topic, index in partitions:
        by_topic.setdefault(topic, []).append(PartitionResult(partition_index=index, error_code=codes[topic, index]))
    return MarkerResult(producer_id=marker.producer_id,
                        topics=[TopicResult(name=topic, partitions=results) for topic, results in by_topic.items()])

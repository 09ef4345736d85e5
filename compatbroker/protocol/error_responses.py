"""The response Apache Kafka sends when a request fails as a whole with one error code.

Kafka's broker answers a request it cannot serve (an authorisation failure, an unexpected exception, a coordinator
that is not ready) with a response built from the request itself: every topic, partition, group or resource the
request names comes back carrying the error, and APIs with a top-level error code carry it there. The shape differs
per API and version, and clients read the error only where Kafka puts it, so `error_response` follows Kafka's rules
API by API: which fields get the code, which placeholders (offset -1, empty member id...) fill the rest. The server
uses it where Kafka answers a request it refuses as a whole (a request other than SaslAuthenticate in the middle of
a SASL exchange), and the toolkit's fault injection to answer a request with an error a real broker could send.

`error_response(api_key, version, request, error)` returns the response body to encode at `version`, or None when
Kafka sends none: a Produce with acks=0 (Kafka then closes the connection, so that the producer notices). APIs
without a rule of their own get their top-level error_code (and error_message) set, when the response has one.
"""
from __future__ import annotations

from collections.abc import Callable

from . import API_KEYS
from .error_codes import ErrorCode
from .records.batch import NO_PRODUCER_EPOCH, NO_PRODUCER_ID

INVALID_OFFSET = -1
NO_TIMESTAMP = -1
NO_NODE = -1
AUTHORIZED_OPERATIONS_OMITTED = -2**31


class NoErrorResponse(LookupError):
    """The API's response has no place for an error code that this module knows how to fill."""


def error_response(api_key: int, version: int, request, error: ErrorCode | int, message: str | None = None):
    """The response Kafka gives `request` (an API `api_key` request decoded at `version`) failing with `error`;
    None when Kafka sends no response. `message` fills error_message fields (default: the code's description)."""
    error = ErrorCode.for_code(int(error))
    text = error.message if message is None else message
    response_cls = API_KEYS[api_key][1]
    builder = _BUILDERS.get(api_key)
    if builder is not None:
        return builder(response_cls, version, request, error, text)
    return _top_level(response_cls, version, request, error, text)


def has_rule(api_key: int) -> bool:
    """Whether `error_response` follows an API-specific rule for `api_key` (otherwise the top-level fallback)."""
    return api_key in _BUILDERS


def can_answer(api_key: int) -> bool:
    """Whether `error_response` can answer requests of `api_key` with an error at all."""
    return has_rule(api_key) or "error_code" in API_KEYS[api_key][1].__slots__


def _top_level(response_cls, version, request, error, text):
    if "error_code" not in response_cls.__slots__:
        raise NoErrorResponse(f"{response_cls.NAME} has no top-level error code to carry {error.name}")
    response = response_cls(error_code=error)
    if "error_message" in response_cls.__slots__:
        response.error_message = text
    return response


# --- data APIs ---------------------------------------------------------------------------------------------------

def _produce(cls, version, request, error, text):
    if request.acks == 0:
        return None
    topics = []
    for topic in request.topic_data:
        partitions = [cls.PartitionProduceResponse(
            index=partition.index, error_code=error, base_offset=INVALID_OFFSET, log_append_time_ms=NO_TIMESTAMP,
            log_start_offset=INVALID_OFFSET, record_errors=[], error_message=text)
            for partition in topic.partition_data]
        topics.append(cls.TopicProduceResponse(name=topic.name, topic_id=topic.topic_id,
                                               partition_responses=partitions))
    return cls(responses=topics)


def _fetch(cls, version, request, error, text):
    # From v13 the top-level code alone tells the client; before, every partition repeats it as well.
    topics = []
    if version < 13:
        for topic in request.topics:
            partitions = [cls.PartitionData(partition_index=partition.partition, error_code=error,
                                            high_watermark=INVALID_OFFSET, aborted_transactions=None,
                                            records=None)
                          for partition in topic.partitions]
            topics.append(cls.FetchableTopicResponse(topic=topic.topic, topic_id=topic.topic_id,
                                                     partitions=partitions))
    return cls(error_code=error, session_id=request.session_id, responses=topics)


def _list_offsets(cls, version, request, error, text):
    topics = []
    for topic in request.topics:
        partitions = []
        for partition in topic.partitions:
            answer = cls.ListOffsetsPartitionResponse(partition_index=partition.partition_index, error_code=error)
            if version == 0:
                answer.old_style_offsets = []
            else:
                answer.offset, answer.timestamp = INVALID_OFFSET, NO_TIMESTAMP
            partitions.append(answer)
        topics.append(cls.ListOffsetsTopicResponse(name=topic.name, partitions=partitions))
    return cls(topics=topics)


def _metadata(cls, version, request, error, text):
    # No brokers and only the topics asked for, each with the error; a request for all topics gets none.
    topics = [cls.MetadataResponseTopic(name=topic.name or "", topic_id=topic.topic_id, error_code=error,
                                        is_internal=False, partitions=[])
              for topic in request.topics or ()]
    return cls(topics=topics)


def _delete_records(cls, version, request, error, text):
    return cls(topics=[cls.DeleteRecordsTopicResult(
        name=topic.name,
        partitions=[cls.DeleteRecordsPartitionResult(partition_index=partition.partition_index, error_code=error,
                                                     low_watermark=INVALID_OFFSET)
                    for partition in topic.partitions])
        for topic in request.topics])


def _init_producer_id(cls, version, request, error, text):
    return cls(error_code=error, producer_id=NO_PRODUCER_ID, producer_epoch=NO_PRODUCER_EPOCH)


def _describe_producers(cls, version, request, error, text):
    return cls(topics=[cls.TopicResponse(
        name=topic.name,
        partitions=[cls.PartitionResponse(partition_index=index, error_code=error)
                    for index in topic.partition_indexes])
        for topic in request.topics])


# --- groups and committed offsets --------------------------------------------------------------------------------

def _offset_commit(cls, version, request, error, text):
    return cls(topics=[cls.OffsetCommitResponseTopic(
        name=topic.name, topic_id=topic.topic_id,
        partitions=[cls.OffsetCommitResponsePartition(partition_index=partition.partition_index, error_code=error)
                    for partition in topic.partitions])
        for topic in request.topics])


def _offset_fetch(cls, version, request, error, text):
    if version >= 8:  # one entry per group, with the error and no offsets
        return cls(groups=[cls.OffsetFetchResponseGroup(group_id=group.group_id, error_code=error, topics=[])
                           for group in request.groups])
    if version >= 2:  # the top-level code only
        return cls(error_code=error, topics=[])
    # v0-1 have no top-level code: every partition asked for carries it, with no offset
    return cls(topics=[cls.OffsetFetchResponseTopic(
        name=topic.name,
        partitions=[cls.OffsetFetchResponsePartition(partition_index=index, committed_offset=INVALID_OFFSET,
                                                     committed_leader_epoch=-1, metadata="", error_code=error)
                    for index in topic.partition_indexes])
        for topic in request.topics or ()])


def _find_coordinator(cls, version, request, error, text):
    if version < 4:
        return cls(error_code=error, error_message=text, node_id=NO_NODE, host="", port=-1)
    return cls(coordinators=[cls.Coordinator(key=key, node_id=NO_NODE, host="", port=-1, error_code=error,
                                             error_message=text)
                             for key in request.coordinator_keys])


def _join_group(cls, version, request, error, text):
    # From v7 the protocol name is nullable, and Kafka sends null; before, an empty string.
    return cls(error_code=error, generation_id=-1, protocol_name=None if version >= 7 else "", leader="",
               member_id="", members=[])


def _sync_group(cls, version, request, error, text):
    return cls(error_code=error, assignment=b"")


def _error_code_only(cls, version, request, error, text):
    return cls(error_code=error)  # Heartbeat, LeaveGroup, OffsetDelete, EndTxn...: nothing per item


def _describe_groups(cls, version, request, error, text):
    return cls(groups=[cls.DescribedGroup(group_id=group_id, error_code=error, group_state="", protocol_type="",
                                          protocol_data="", members=[],
                                          authorized_operations=AUTHORIZED_OPERATIONS_OMITTED)
                       for group_id in request.groups])


def _list_groups(cls, version, request, error, text):
    return cls(error_code=error, groups=[])


def _delete_groups(cls, version, request, error, text):
    return cls(results=[cls.DeletableGroupResult(group_id=group_id, error_code=error)
                        for group_id in request.groups_names])


def _offset_for_leader_epoch(cls, version, request, error, text):
    return cls(topics=[cls.OffsetForLeaderTopicResult(
        topic=topic.topic,
        partitions=[cls.EpochEndOffset(partition=partition.partition, error_code=error, leader_epoch=-1,
                                       end_offset=INVALID_OFFSET)
                    for partition in topic.partitions])
        for topic in request.topics])


def _consumer_group_describe(cls, version, request, error, text):
    return cls(groups=[cls.DescribedGroup(group_id=group_id, error_code=error) for group_id in request.group_ids])


def _share_group_offsets_describe(cls, version, request, error, text):
    # Each group named carries the code and message at group level, with no topics.
    return cls(groups=[cls.DescribeShareGroupOffsetsResponseGroup(group_id=group.group_id, topics=[],
                                                                  error_code=error, error_message=text)
                       for group in request.groups])


# --- transactions --------------------------------------------------------------------------------------------------

def _add_partitions_to_txn(cls, version, request, error, text):
    if version >= 4:  # the batched form answers with the top-level code alone
        return cls(error_code=error)
    return cls(results_by_topic_v3_and_below=[cls.AddPartitionsToTxnTopicResult(
        name=topic.name,
        results_by_partition=[cls.AddPartitionsToTxnPartitionResult(partition_index=index,
                                                                    partition_error_code=error)
                              for index in topic.partitions])
        for topic in request.v3_and_below_topics])


def _txn_offset_commit(cls, version, request, error, text):
    return cls(topics=[cls.TxnOffsetCommitResponseTopic(
        name=topic.name,
        partitions=[cls.TxnOffsetCommitResponsePartition(partition_index=partition.partition_index,
                                                         error_code=error)
                    for partition in topic.partitions])
        for topic in request.topics])


def _write_txn_markers(cls, version, request, error, text):
    return cls(markers=[cls.WritableTxnMarkerResult(
        producer_id=marker.producer_id,
        topics=[cls.WritableTxnMarkerTopicResult(
            name=topic.name,
            partitions=[cls.WritableTxnMarkerPartitionResult(partition_index=index, error_code=error)
                        for index in topic.partition_indexes])
            for topic in marker.topics])
        for marker in request.markers])


def _describe_transactions(cls, version, request, error, text):
    return cls(transaction_states=[cls.TransactionState(transactional_id=transactional_id, error_code=error)
                                   for transactional_id in request.transactional_ids])


# --- cluster and admin APIs --------------------------------------------------------------------------------------

def _api_versions(cls, version, request, error, text):
    # With UNSUPPORTED_VERSION, Kafka lists the ApiVersions range it serves so that the client can retry (KIP-511).
    if error is ErrorCode.UNSUPPORTED_VERSION:
        from ..handlers.api_versions import unsupported_version_response
        return unsupported_version_response()
    return cls(error_code=error)


def _create_topics(cls, version, request, error, text):
    return cls(topics=[cls.CreatableTopicResult(name=topic.name, error_code=error, error_message=text)
                       for topic in request.topics])


def _delete_topics(cls, version, request, error, text):
    if version >= 6:
        named = [(topic.name, topic.topic_id) for topic in request.topics]
    else:
        named = [(name, None) for name in request.topic_names]
    results = []
    for name, topic_id in named:
        result = cls.DeletableTopicResult(name=name, error_code=error)
        if topic_id is not None:
            result.topic_id = topic_id
        results.append(result)
    return cls(responses=results)


def _create_partitions(cls, version, request, error, text):
    return cls(results=[cls.CreatePartitionsTopicResult(name=topic.name, error_code=error, error_message=text)
                        for topic in request.topics])


def _code_and_message(cls, version, request, error, text):
    return cls(error_code=error, error_message=text)  # DescribeCluster, DescribeAcls, SaslAuthenticate


def _describe_log_dirs(cls, version, request, error, text):
    return cls(error_code=error, results=[])  # the code is on the wire from v3; older versions see no results


def _describe_configs(cls, version, request, error, text):
    return cls(results=[cls.DescribeConfigsResult(error_code=error, error_message=text,
                                                  resource_type=resource.resource_type,
                                                  resource_name=resource.resource_name, configs=[])
                        for resource in request.resources])


def _create_acls(cls, version, request, error, text):
    return cls(results=[cls.AclCreationResult(error_code=error, error_message=text) for _ in request.creations])


def _delete_acls(cls, version, request, error, text):
    return cls(filter_results=[cls.DeleteAclsFilterResult(error_code=error, error_message=text, matching_acls=[])
                               for _ in request.filters])


def _alter_configs(cls, version, request, error, text):
    # AlterConfigs and IncrementalAlterConfigs answer alike: one result per resource.
    return cls(responses=[cls.AlterConfigsResourceResponse(error_code=error, error_message=text,
                                                           resource_type=resource.resource_type,
                                                           resource_name=resource.resource_name)
                          for resource in request.resources])


# --- cluster placement ------------------------------------------------------------------------------------------

def _alter_replica_log_dirs(cls, version, request, error, text):
    # One result per topic of each directory asked for, every partition carrying the code (no top-level one).
    return cls(results=[cls.AlterReplicaLogDirTopicResult(
        topic_name=topic.name,
        partitions=[cls.AlterReplicaLogDirPartitionResult(partition_index=index, error_code=error)
                    for index in topic.partitions])
        for log_dir in request.dirs for topic in log_dir.topics])


def _elect_leaders(cls, version, request, error, text):
    # Each partition named carries the code and message (none for a request naming every partition); the
    # top-level code exists from v1.
    results = [cls.ReplicaElectionResult(
        topic=topic.topic,
        partition_result=[cls.PartitionResult(partition_id=index, error_code=error, error_message=text)
                          for index in topic.partitions])
        for topic in request.topic_partitions or ()]
    return cls(error_code=error if version >= 1 else 0, replica_election_results=results)


def _alter_partition_reassignments(cls, version, request, error, text):
    responses = [cls.ReassignableTopicResponse(
        name=topic.name,
        partitions=[cls.ReassignablePartitionResponse(partition_index=partition.partition_index, error_code=error,
                                                      error_message=text)
                    for partition in topic.partitions])
        for topic in request.topics]
    return cls(error_code=error, error_message=text, responses=responses)


def _list_partition_reassignments(cls, version, request, error, text):
    # The partitions asked for, with no replicas, and the code at the top level only.
    topics = [cls.OngoingTopicReassignment(
        name=topic.name,
        partitions=[cls.OngoingPartitionReassignment(partition_index=index, replicas=[], adding_replicas=[],
                                                     removing_replicas=[])
                    for index in topic.partition_indexes])
        for topic in request.topics or ()]
    return cls(error_code=error, error_message=text, topics=topics)


def _describe_topic_partitions(cls, version, request, error, text):
    return cls(topics=[cls.DescribeTopicPartitionsResponseTopic(name=topic.name, error_code=error, is_internal=False,
                                                                partitions=[])
                       for topic in request.topics])


def _describe_user_scram_credentials(cls, version, request, error, text):
    # As Kafka's getErrorResponse: the code at the top and in one result per user asked about (its name unset).
    results = [cls.DescribeUserScramCredentialsResult(error_code=error, error_message=text)
               for _user in request.users or ()]
    return cls(error_code=error, error_message=text, results=results)


def _alter_user_scram_credentials(cls, version, request, error, text):
    users = sorted({change.name for change in [*request.deletions, *request.upsertions]})
    return cls(results=[cls.AlterUserScramCredentialsResult(user=user, error_code=error, error_message=text)
                        for user in users])


_Builder = Callable[[type, int, object, ErrorCode, str], object]
_BUILDERS: dict[int, _Builder] = {
    0: _produce,
    1: _fetch,
    2: _list_offsets,
    3: _metadata,
    8: _offset_commit,
    9: _offset_fetch,
    10: _find_coordinator,
    11: _join_group,
    12: _error_code_only,     # Heartbeat
    13: _error_code_only,     # LeaveGroup
    14: _sync_group,
    15: _describe_groups,
    16: _list_groups,
    17: _error_code_only,     # SaslHandshake
    18: _api_versions,
    19: _create_topics,
    20: _delete_topics,
    21: _delete_records,
    22: _init_producer_id,
    23: _offset_for_leader_epoch,
    24: _add_partitions_to_txn,
    25: _error_code_only,     # AddOffsetsToTxn
    26: _error_code_only,     # EndTxn
    27: _write_txn_markers,
    28: _txn_offset_commit,
    29: _code_and_message,    # DescribeAcls
    30: _create_acls,
    31: _delete_acls,
    32: _describe_configs,
    33: _alter_configs,
    34: _alter_replica_log_dirs,
    35: _describe_log_dirs,
    36: _code_and_message,    # SaslAuthenticate
    37: _create_partitions,
    42: _delete_groups,
    43: _elect_leaders,
    44: _alter_configs,       # IncrementalAlterConfigs
    45: _alter_partition_reassignments,
    46: _list_partition_reassignments,
    47: _error_code_only,     # OffsetDelete
    50: _describe_user_scram_credentials,
    51: _alter_user_scram_credentials,
    55: _code_and_message,    # DescribeQuorum
    60: _code_and_message,    # DescribeCluster
    61: _describe_producers,
    65: _describe_transactions,
    66: _error_code_only,     # ListTransactions
    68: _error_code_only,     # ConsumerGroupHeartbeat
    69: _consumer_group_describe,
    71: _error_code_only,     # GetTelemetrySubscriptions
    72: _error_code_only,     # PushTelemetry
    74: _error_code_only,     # ListConfigResources
    75: _describe_topic_partitions,
    76: _error_code_only,     # ShareGroupHeartbeat
    77: _consumer_group_describe,  # ShareGroupDescribe: each group, as ConsumerGroupDescribe
    78: _error_code_only,     # ShareFetch: the top-level code alone
    79: _error_code_only,     # ShareAcknowledge
    90: _share_group_offsets_describe,
    91: _code_and_message,    # AlterShareGroupOffsets
    92: _code_and_message,    # DeleteShareGroupOffsets
}

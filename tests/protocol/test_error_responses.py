"""Error responses for every API and version of the schemas (those the broker serves, and the others for when it
does): each encodes at its version, and after a round trip through the codec the error sits exactly where Kafka's
getErrorResponse puts it, once per topic, partition, group or resource named in the request (or at the top level),
with Kafka's placeholders elsewhere."""
from __future__ import annotations

import uuid

import pytest

from compatbroker.handlers import default_registry
from compatbroker.protocol import API_KEYS, decode_response, encode_response
from compatbroker.protocol.data import Data
from compatbroker.protocol.error_codes import ErrorCode
from compatbroker.protocol.messages import (AlterConfigsRequest, AlterPartitionReassignmentsRequest,
                                            AlterReplicaLogDirsRequest, ApiVersionsRequest, CreatePartitionsRequest,
                                            CreateTopicsRequest, DeleteGroupsRequest, DeleteRecordsRequest,
                                            DeleteTopicsRequest, DescribeClusterRequest, DescribeConfigsRequest,
                                            DescribeGroupsRequest, DescribeLogDirsRequest, DescribeProducersRequest,
                                            DescribeTopicPartitionsRequest, ElectLeadersRequest, FetchRequest,
                                            FindCoordinatorRequest, HeartbeatRequest, IncrementalAlterConfigsRequest,
                                            InitProducerIdRequest, JoinGroupRequest, LeaveGroupRequest,
                                            ListGroupsRequest, ListOffsetsRequest, ListPartitionReassignmentsRequest,
                                            MetadataRequest, OffsetCommitRequest, OffsetDeleteRequest,
                                            OffsetFetchRequest, ProduceRequest, SyncGroupRequest)
from compatbroker.protocol.records import build_batch
from compatbroker.protocol.schema import load_schemas, snake_case
from compatbroker.protocol import error_responses
from compatbroker.protocol.error_responses import NoErrorResponse, error_response, has_rule
from tests.handlers import helpers as handler_helpers

ERROR = ErrorCode.NOT_LEADER_OR_FOLLOWER
TOPIC_ID = uuid.UUID("12345678-1234-5678-1234-567812345678")
TOPIC_RESOURCE = 2


def sample(api_key: int):
    """A request of every field a client may fill: two topics or groups where the API takes several."""
    batch = build_batch([(b"k", b"v", (), 1_700_000_000_000)])
    samples = {
        0: ProduceRequest(acks=-1, timeout_ms=1000, topic_data=[
            ProduceRequest.TopicProduceData(name="t", topic_id=TOPIC_ID, partition_data=[
                ProduceRequest.PartitionProduceData(index=0, records=batch),
                ProduceRequest.PartitionProduceData(index=1, records=batch)]),
            ProduceRequest.TopicProduceData(name="u", partition_data=[
                ProduceRequest.PartitionProduceData(index=0, records=batch)])]),
        1: FetchRequest(max_wait_ms=500, session_id=7, topics=[FetchRequest.FetchTopic(
            topic="t", topic_id=TOPIC_ID, partitions=[FetchRequest.FetchPartition(partition=0),
                                                      FetchRequest.FetchPartition(partition=2)])]),
        2: ListOffsetsRequest(topics=[ListOffsetsRequest.ListOffsetsTopic(
            name="t", partitions=[ListOffsetsRequest.ListOffsetsPartition(partition_index=3, timestamp=-1)])]),
        3: MetadataRequest(topics=[MetadataRequest.MetadataRequestTopic(name="t", topic_id=TOPIC_ID)]),
        8: OffsetCommitRequest(group_id="g", topics=[OffsetCommitRequest.OffsetCommitRequestTopic(
            name="t", topic_id=TOPIC_ID, partitions=[OffsetCommitRequest.OffsetCommitRequestPartition(
                partition_index=0, committed_offset=5)])]),
        9: OffsetFetchRequest(group_id="g", topics=[OffsetFetchRequest.OffsetFetchRequestTopic(
            name="t", partition_indexes=[0, 1])], groups=[OffsetFetchRequest.OffsetFetchRequestGroup(
                group_id="g", topics=[OffsetFetchRequest.OffsetFetchRequestTopics(name="t",
                                                                                   partition_indexes=[0, 1])])]),
        10: FindCoordinatorRequest(key="g", coordinator_keys=["g", "h"]),
        11: JoinGroupRequest(group_id="g", session_timeout_ms=10000, rebalance_timeout_ms=10000,
                             protocol_type="consumer",
                             protocols=[JoinGroupRequest.JoinGroupRequestProtocol(name="range", metadata=b"")]),
        12: HeartbeatRequest(group_id="g", generation_id=1, member_id="m"),
        13: LeaveGroupRequest(group_id="g", member_id="m",
                              members=[LeaveGroupRequest.MemberIdentity(member_id="m")]),
        14: SyncGroupRequest(group_id="g", generation_id=1, member_id="m"),
        15: DescribeGroupsRequest(groups=["g", "h"]),
        16: ListGroupsRequest(),
        18: ApiVersionsRequest(client_software_name="app", client_software_version="1.0"),
        19: CreateTopicsRequest(topics=[CreateTopicsRequest.CreatableTopic(name="t", num_partitions=1,
                                                                           replication_factor=1)]),
        20: DeleteTopicsRequest(topic_names=["t"], topics=[DeleteTopicsRequest.DeleteTopicState(
            name="t", topic_id=TOPIC_ID)]),
        21: DeleteRecordsRequest(topics=[DeleteRecordsRequest.DeleteRecordsTopic(
            name="t", partitions=[DeleteRecordsRequest.DeleteRecordsPartition(partition_index=0, offset=3)])]),
        22: InitProducerIdRequest(transactional_id=None, transaction_timeout_ms=60000),
        32: DescribeConfigsRequest(resources=[DescribeConfigsRequest.DescribeConfigsResource(
            resource_type=TOPIC_RESOURCE, resource_name="t")]),
        33: AlterConfigsRequest(resources=[AlterConfigsRequest.AlterConfigsResource(
            resource_type=TOPIC_RESOURCE, resource_name="t")]),
        35: DescribeLogDirsRequest(topics=None),
        37: CreatePartitionsRequest(topics=[CreatePartitionsRequest.CreatePartitionsTopic(name="t", count=3)]),
        42: DeleteGroupsRequest(groups_names=["g", "h"]),
        44: IncrementalAlterConfigsRequest(resources=[IncrementalAlterConfigsRequest.AlterConfigsResource(
            resource_type=TOPIC_RESOURCE, resource_name="t")]),
        47: OffsetDeleteRequest(group_id="g", topics=[OffsetDeleteRequest.OffsetDeleteRequestTopic(
            name="t", partitions=[OffsetDeleteRequest.OffsetDeleteRequestPartition(partition_index=0)])]),
        60: DescribeClusterRequest(),
        61: DescribeProducersRequest(topics=[DescribeProducersRequest.TopicRequest(
            name="t", partition_indexes=[0, 1])]),
        34: AlterReplicaLogDirsRequest(dirs=[
            AlterReplicaLogDirsRequest.AlterReplicaLogDir(path="/a", topics=[
                AlterReplicaLogDirsRequest.AlterReplicaLogDirTopic(name="t", partitions=[0, 1])]),
            AlterReplicaLogDirsRequest.AlterReplicaLogDir(path="/b", topics=[
                AlterReplicaLogDirsRequest.AlterReplicaLogDirTopic(name="u", partitions=[2])])]),
        43: ElectLeadersRequest(election_type=0, topic_partitions=[
            ElectLeadersRequest.TopicPartitions(topic="t", partitions=[0, 1])]),
        45: AlterPartitionReassignmentsRequest(topics=[AlterPartitionReassignmentsRequest.ReassignableTopic(
            name="t", partitions=[
                AlterPartitionReassignmentsRequest.ReassignablePartition(partition_index=0, replicas=[1, 2]),
                AlterPartitionReassignmentsRequest.ReassignablePartition(partition_index=1, replicas=None)])]),
        46: ListPartitionReassignmentsRequest(topics=[
            ListPartitionReassignmentsRequest.ListPartitionReassignmentsTopics(name="t", partition_indexes=[0, 1])]),
        75: DescribeTopicPartitionsRequest(topics=[DescribeTopicPartitionsRequest.TopicRequest(name="t"),
                                                   DescribeTopicPartitionsRequest.TopicRequest(name="u")]),
    }
    if api_key in samples:
        return samples[api_key]
    return _unserved_sample(api_key)


def _unserved_sample(api_key: int):
    """Requests of the APIs this broker does not serve yet (their rules are ready for when it does)."""
    request_cls = API_KEYS[api_key][0]
    if api_key == 23:
        return request_cls(topics=[request_cls.OffsetForLeaderTopic(topic="t", partitions=[
            request_cls.OffsetForLeaderPartition(partition=0), request_cls.OffsetForLeaderPartition(partition=1)])])
    if api_key == 24:
        return request_cls(v3_and_below_transactional_id="tx", v3_and_below_topics=[
            request_cls.AddPartitionsToTxnTopic(name="t", partitions=[0, 1])],
            transactions=[request_cls.AddPartitionsToTxnTransaction(transactional_id="tx")])
    if api_key == 27:
        return request_cls(markers=[request_cls.WritableTxnMarker(producer_id=5, topics=[
            request_cls.WritableTxnMarkerTopic(name="t", partition_indexes=[0, 1])])])
    if api_key == 28:
        return request_cls(transactional_id="tx", group_id="g", topics=[request_cls.TxnOffsetCommitRequestTopic(
            name="t", partitions=[request_cls.TxnOffsetCommitRequestPartition(partition_index=0)])])
    if api_key == 30:
        return request_cls(creations=[request_cls.AclCreation(), request_cls.AclCreation()])
    if api_key == 31:
        return request_cls(filters=[request_cls.DeleteAclsFilter(), request_cls.DeleteAclsFilter()])
    if api_key == 50:
        return request_cls(users=[request_cls.UserName(name="alice"), request_cls.UserName(name="bob")])
    if api_key == 51:
        return request_cls(deletions=[request_cls.ScramCredentialDeletion(name="bob", mechanism=1)],
                           upsertions=[request_cls.ScramCredentialUpsertion(name="alice", mechanism=2,
                                                                            iterations=4096, salt=b"s",
                                                                            salted_password=b"p")])
    if api_key == 65:
        return request_cls(transactional_ids=["a", "b"])
    if api_key in (69, 77):
        return request_cls(group_ids=["g", "h"])
    if api_key == 90:
        return request_cls(groups=[request_cls.DescribeShareGroupOffsetsRequestGroup(group_id="g", topics=None),
                                   request_cls.DescribeShareGroupOffsetsRequestGroup(group_id="h", topics=[
                                       request_cls.DescribeShareGroupOffsetsRequestTopic(topic_name="t",
                                                                                         partitions=[0])])])
    return request_cls()  # SaslHandshake, AddOffsetsToTxn, EndTxn, DescribeAcls, SaslAuthenticate, ...


def expected_places(api_key: int, version: int) -> int:
    """How many error codes Kafka's error response to `sample(api_key)` carries at `version`."""
    if api_key == 0:
        return 3                                  # every partition
    if api_key == 1:
        if version >= 13:
            return 1                              # the top-level code alone
        return 2 + (1 if version >= 7 else 0)     # every partition, and the top level once it exists
    if api_key == 9:
        return 2 if version < 2 else 1            # partitions; then the top level; from v8 the group
    if api_key == 10:
        return 1 if version < 4 else 2            # top level; from v4 each coordinator key
    if api_key in (15, 42, 69, 77, 90):
        return 2                                  # each group
    if api_key in (23, 27, 61):
        return 2                                  # each partition
    if api_key == 24:
        return 2 if version < 4 else 1            # each partition; the top level of the batched form
    if api_key in (30, 31, 65):
        return 2                                  # each ACL creation, filter, transactional id
    if api_key == 35:
        return 1 if version >= 3 else 0           # v0-2 responses have no error field at all
    if api_key == 34:
        return 3                                  # every partition of every directory's topics
    if api_key == 43:
        return 2 + (1 if version >= 1 else 0)     # every partition, and the top level from v1
    if api_key == 45:
        return 3                                  # every partition and the top level
    if api_key == 75:
        return 2                                  # every topic
    if api_key == 50:
        return 3                                  # the top level and each user asked about
    if api_key == 51:
        return 2                                  # each user named
    return 1


def served_versions():
    return [(api_key, version) for api_key, module in default_registry().items()
            for version in range(module.MIN_VERSION, module.MAX_VERSION + 1)]


def unserved_versions():
    served = default_registry()
    return [(api_key, version) for api_key in API_KEYS if api_key not in served
            for version in range(API_KEYS[api_key][0].VALID_VERSIONS[0], API_KEYS[api_key][0].VALID_VERSIONS[1] + 1)]


def as_received(api_key: int, version: int, request):
    """The request as a client of `version` sends it: fields that version lacks keep their defaults."""
    fit(request, SCHEMAS[API_KEYS[api_key][0].NAME].struct, version)
    return handler_helpers.as_received(api_key, version, request)


SCHEMAS = load_schemas()


def fit(obj, struct, version: int) -> None:
    defaults = type(obj)()
    for spec in struct.fields:
        name = snake_case(spec.name)
        if version not in spec.versions:
            setattr(obj, name, getattr(defaults, name))
        elif spec.is_struct:
            value = getattr(obj, name)
            for item in (value or []) if spec.is_array else [value]:
                fit(item, spec.struct, version)


def round_trip(api_key: int, version: int, response):
    return decode_response(api_key, version, encode_response(api_key, version, 1, response))[1]


def error_codes(value) -> list[int]:
    """Every non-zero error_code in a decoded message, depth first."""
    found = []
    if isinstance(value, Data):
        for name in value.__slots__:
            item = getattr(value, name)
            if name.endswith("error_code") and item:
                found.append(item)
            else:
                found.extend(error_codes(item))
    elif isinstance(value, list):
        for item in value:
            found.extend(error_codes(item))
    return found


def test_every_api_of_the_schemas_has_a_rule_of_its_own():
    assert [api_key for api_key in API_KEYS if not has_rule(api_key)] == []


@pytest.mark.parametrize("api_key,version", served_versions() + unserved_versions())
def test_the_error_reaches_every_place_kafka_puts_it(api_key, version):
    request = as_received(api_key, version, sample(api_key))
    response = round_trip(api_key, version, error_response(api_key, version, request, ERROR))
    assert error_codes(response) == [ERROR] * expected_places(api_key, version)


@pytest.mark.parametrize("version", range(14))
def test_produce_partitions_carry_invalid_offsets_and_keep_their_topics(version):
    request = as_received(0, version, sample(0))
    response = round_trip(0, version, error_response(0, version, request, ERROR))
    assert [(topic.name if version < 13 else topic.topic_id, [p.index for p in topic.partition_responses])
            for topic in response.responses] == [("t" if version < 13 else TOPIC_ID, [0, 1]),
                                                 ("u" if version < 13 else uuid.UUID(int=0), [0])]
    partition = response.responses[0].partition_responses[0]
    assert (partition.base_offset, partition.log_append_time_ms if version >= 2 else -1,
            partition.log_start_offset if version >= 5 else -1) == (-1, -1, -1)


def test_produce_with_acks_zero_gets_no_response():
    request = sample(0)
    request.acks = 0
    assert error_response(0, 9, request, ERROR) is None


@pytest.mark.parametrize("version", [4, 12, 13, 18])
def test_fetch_keeps_the_session_and_gives_partitions_no_high_watermark(version):
    request = as_received(1, version, sample(1))
    response = round_trip(1, version, error_response(1, version, request, ERROR))
    if version >= 7:
        assert (response.error_code, response.session_id) == (ERROR, 7)
    if version < 13:
        partitions = response.responses[0].partitions
        assert [(p.partition_index, p.high_watermark) for p in partitions] == [(0, -1), (2, -1)]
    else:
        assert response.responses == []


@pytest.mark.parametrize("version,offsets", [(0, None), (1, -1), (11, -1)])
def test_list_offsets_partitions_have_no_offset(version, offsets):
    request = as_received(2, version, sample(2))
    partition = round_trip(2, version, error_response(2, version, request, ERROR)).topics[0].partitions[0]
    assert partition.partition_index == 3
    if version == 0:
        assert partition.old_style_offsets == []
    else:
        assert (partition.offset, partition.timestamp) == (-1, -1)


@pytest.mark.parametrize("version", [6, 7, 9])
def test_join_group_answers_no_member_and_a_null_protocol_from_v7(version):
    request = as_received(11, version, sample(11))
    response = round_trip(11, version, error_response(11, version, request, ERROR))
    assert (response.generation_id, response.member_id, response.leader, response.members) == (-1, "", "", [])
    assert response.protocol_name == (None if version >= 7 else "")


@pytest.mark.parametrize("version", [0, 3, 4, 6])
def test_find_coordinator_points_nowhere(version):
    request = as_received(10, version, sample(10))
    response = round_trip(10, version, error_response(10, version, request, ERROR))
    if version < 4:
        assert (response.node_id, response.host, response.port) == (-1, "", -1)
    else:
        assert [(c.key, c.node_id, c.port) for c in response.coordinators] == [("g", -1, -1), ("h", -1, -1)]


def test_metadata_for_all_topics_answers_no_topic_and_no_broker():
    request = as_received(3, 12, MetadataRequest(topics=None))
    response = round_trip(3, 12, error_response(3, 12, request, ERROR))
    assert (response.topics, response.brokers) == ([], [])


def test_api_versions_unsupported_version_lists_the_api_versions_range():
    from compatbroker.handlers import api_versions
    request = as_received(18, 3, sample(18))
    response = round_trip(18, 3, error_response(18, 3, request, ErrorCode.UNSUPPORTED_VERSION))
    assert [(k.api_key, k.min_version, k.max_version) for k in response.api_keys] == [
        (18, api_versions.MIN_VERSION, api_versions.MAX_VERSION)]


def test_error_messages_carry_the_codes_description_or_the_given_text():
    request = as_received(19, 7, sample(19))
    default = round_trip(19, 7, error_response(19, 7, request, ErrorCode.POLICY_VIOLATION))
    assert default.topics[0].error_message == ErrorCode.POLICY_VIOLATION.message
    custom = round_trip(19, 7, error_response(19, 7, request, ErrorCode.POLICY_VIOLATION, "no"))
    assert custom.topics[0].error_message == "no"


def test_an_api_without_a_rule_gets_its_top_level_error_code_and_message(monkeypatch):
    monkeypatch.delitem(error_responses._BUILDERS, 60)  # as an API of a newer schema would be
    request = as_received(60, 1, sample(60))
    response = round_trip(60, 1, error_response(60, 1, request, ErrorCode.CLUSTER_AUTHORIZATION_FAILED))
    assert (response.error_code, response.error_message) == (ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
                                                             ErrorCode.CLUSTER_AUTHORIZATION_FAILED.message)


def test_an_api_without_a_rule_or_a_top_level_code_is_refused(monkeypatch):
    monkeypatch.delitem(error_responses._BUILDERS, 27)
    with pytest.raises(NoErrorResponse):
        error_response(27, 1, sample(27), ERROR)

"""The counting a node does as it serves: request stats, the error codes found in responses, topic tables."""
from __future__ import annotations

import uuid

import pytest

from compatbroker.metrics.counting import LATENCY_BOUNDS_S, BrokerMetrics, RequestStats, _Plan, count_errors
from compatbroker.protocol import FileRegion
from compatbroker.protocol.error_codes import ErrorCode
from compatbroker.protocol.messages import MESSAGES, FetchResponse, MetadataResponse, ProduceResponse
from compatbroker.protocol.schema import load_schemas, snake_case

_RESPONSES = sorted((name, spec) for name, spec in load_schemas().items() if spec.type == "response")
_LIST_ELEMENTS = {"string": "x", "uuid": uuid.UUID(int=1), "bool": True, "float64": 1.0, "bytes": b"x", "records": b"x"}


def _produce_response(*codes: int) -> ProduceResponse:
    partitions = [ProduceResponse.PartitionProduceResponse(index=index, error_code=code)
                  for index, code in enumerate(codes)]
    return ProduceResponse(responses=[ProduceResponse.TopicProduceResponse(name="t", partition_responses=partitions)])


def test_every_error_code_occurrence_is_counted_and_the_first_failure_returned():
    counts: dict[int, int] = {}
    first = count_errors(_produce_response(0, ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.MESSAGE_TOO_LARGE, 0),
                         counts)
    assert first == ErrorCode.NOT_LEADER_OR_FOLLOWER
    assert counts == {0: 2, ErrorCode.NOT_LEADER_OR_FOLLOWER: 1, ErrorCode.MESSAGE_TOO_LARGE: 1}
    assert count_errors(_produce_response(0, 0), counts) == 0
    assert counts[0] == 4


def test_the_top_level_code_comes_first_and_records_are_never_read():
    class Unreadable:
        """A file a records region points at: reading it would fail the test."""

        def fileno(self):
            raise AssertionError("the walk read the records")

    partition = FetchResponse.PartitionData(partition_index=0, error_code=ErrorCode.OFFSET_OUT_OF_RANGE,
                                            records=FileRegion(Unreadable(), 0, 100))
    response = FetchResponse(error_code=ErrorCode.FETCH_SESSION_ID_NOT_FOUND,
                             responses=[FetchResponse.FetchableTopicResponse(topic="t", partitions=[partition])])
    for _ in range(3):  # the plan learnt on the first walk gives the same answer
        counts: dict[int, int] = {}
        assert count_errors(response, counts) == ErrorCode.FETCH_SESSION_ID_NOT_FOUND
        assert counts == {ErrorCode.FETCH_SESSION_ID_NOT_FOUND: 1, ErrorCode.OFFSET_OUT_OF_RANGE: 1}


def test_codes_nested_below_lists_of_scalars_and_empty_lists_are_found():
    broker = MetadataResponse.MetadataResponseBroker(node_id=1, host="h", port=1)
    healthy = MetadataResponse.MetadataResponseTopic(name="a", partitions=[
        MetadataResponse.MetadataResponsePartition(error_code=0, replica_nodes=[1, 2], isr_nodes=[1])])
    empty = MetadataResponse.MetadataResponseTopic(name="b", partitions=[])
    missing = MetadataResponse.MetadataResponseTopic(name="c", error_code=ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
    counts: dict[int, int] = {}
    first = count_errors(MetadataResponse(brokers=[broker], topics=[healthy, empty, missing]), counts)
    assert first == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    # NONE: the response's own code (v13+), topics a and b, a's partition
    assert counts == {0: 4, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION: 1}


def test_a_list_field_settled_twice_is_still_walked_once():
    """Brokers of one process (each on its own loop thread) share the plans: one settling a field another has
    just settled, from the view it had before, changes nothing."""
    partition = MetadataResponse.MetadataResponsePartition(error_code=ErrorCode.LEADER_NOT_AVAILABLE)
    topic = MetadataResponse.MetadataResponseTopic(name="a", partitions=[partition])
    plan = _Plan(MetadataResponse.MetadataResponseTopic)
    plan._settle("partitions", partition)
    plan._settle("partitions", partition)
    counts: dict[int, int] = {}
    assert plan.count(topic, counts) == ErrorCode.LEADER_NOT_AVAILABLE
    assert counts == {0: 1, ErrorCode.LEADER_NOT_AVAILABLE: 1}


def test_latency_lands_in_the_bucket_of_its_upper_bound():
    stats = RequestStats(0, 9)
    stats.record(0.0005, None)  # on a bound: that bucket (Prometheus's le is inclusive)
    stats.record(0.0007, None)
    stats.record(60.0, None)    # above every bound
    assert stats.count == 3
    assert stats.buckets[0] == 1 and stats.buckets[1] == 1 and stats.buckets[len(LATENCY_BOUNDS_S)] == 1
    assert sum(stats.buckets) == 3
    assert abs(stats.latency_sum_s - 60.0012) < 1e-9


def test_request_stats_are_one_per_api_and_version():
    metrics = BrokerMetrics()
    assert metrics.request_stats(0, 9) is metrics.request_stats(0, 9)
    assert metrics.request_stats(0, 9) is not metrics.request_stats(0, 10)
    assert metrics.request_stats(1, 9) is not metrics.request_stats(0, 9)


def test_deleted_topics_fall_out_of_the_topic_table():
    existing = {f"kept-{index}" for index in range(10)}
    metrics = BrokerMetrics(topic_exists=lambda name: name in existing)
    for index in range(200):  # topics created and deleted: the table stays bounded
        metrics.topic(f"gone-{index}").messages_in += 1
    for name in existing:
        metrics.topic(name).messages_in += 1
    assert len(metrics.topics) < 100
    metrics.prune_topics()
    assert set(metrics.topics) == existing


def _filled(spec, struct, cls, codes: list[int]):
    """An instance of `cls` with one element in every list and every struct (nullable ones too) set, its error
    codes numbered 1, 2, ... in the order they are walked: a struct's own, then its fields' in field order."""
    values = {}
    for field in struct.fields:
        name = snake_case(field.name)
        if name.endswith("error_code"):
            assert field.type == "int16", f"{spec.name}.{field.name} is not an error code"
            codes.append(len(codes) + 1)
            values[name] = codes[-1]
    for field in struct.fields:
        name = snake_case(field.name)
        if field.struct is not None:
            inner = _filled(spec, field.struct, getattr(MESSAGES[spec.name], field.struct.name), codes)
            values[name] = [inner] if field.is_array else inner
        elif field.is_array:
            values[name] = [_LIST_ELEMENTS.get(field.element_type, 1)]  # numbers, strings: no codes
    return cls(**values)


@pytest.mark.parametrize("name, spec", _RESPONSES, ids=[name for name, _ in _RESPONSES])
def test_every_error_code_field_of_a_response_schema_is_counted_once(name, spec):
    """The plans learnt from the classes, and the Produce and Fetch counters written out, find exactly the
    schema's `*ErrorCode` fields, nullable structs' and nested lists' included, on first sight and after."""
    codes: list[int] = []
    response = _filled(spec, spec.struct, MESSAGES[name], codes)
    for _ in range(2):
        counts: dict[int, int] = {}
        assert count_errors(response, counts) == (1 if codes else 0)
        assert counts == {code: 1 for code in codes}

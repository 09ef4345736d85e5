"""The fault injector on its own: rules, counts, topic filters, latency, drops and the bounded request log."""
from __future__ import annotations

import uuid

import pytest

from compatbroker.toolkit.faults import (FaultError, FaultInjector, RequestLogEntry, request_topics, resolve_api,
                                         resolve_error)
from compatbroker.protocol import RequestHeader
from compatbroker.protocol.error_codes import ErrorCode
from compatbroker.protocol.messages import (DeleteTopicsRequest, FetchRequest, MetadataRequest, OffsetFetchRequest,
                                            ProduceRequest)

PRODUCE, FETCH, METADATA = 0, 1, 3


def header(api_key: int, version: int = 9, correlation_id: int = 1, client_id: str = "c"):
    return RequestHeader(request_api_key=api_key, request_api_version=version, correlation_id=correlation_id,
                         client_id=client_id)


def produce(*topics: str):
    return ProduceRequest(acks=-1, topic_data=[ProduceRequest.TopicProduceData(
        name=topic, partition_data=[ProduceRequest.PartitionProduceData(index=0)]) for topic in topics])


@pytest.mark.parametrize("spelling", ["Produce", "PRODUCE", "produce", 0, "0"])
def test_apis_resolve_from_kafka_names_in_any_case_or_from_their_key(spelling):
    assert resolve_api(spelling) == PRODUCE
    assert resolve_api("offset_commit") == resolve_api("OffsetCommit") == 8


@pytest.mark.parametrize("spelling", ["NOT_LEADER_OR_FOLLOWER", "not_leader_or_follower", 6, "6"])
def test_errors_resolve_from_kafka_names_or_codes(spelling):
    assert resolve_error(spelling) is ErrorCode.NOT_LEADER_OR_FOLLOWER


@pytest.mark.parametrize("bad", [("Produc", "NOT_LEADER_OR_FOLLOWER"), ("Produce", "NOT_AN_ERROR"),
                                 ("Produce", "NONE"), ("Produce", 0), (999, 6)])
def test_unknown_apis_and_errors_are_refused(bad):
    with pytest.raises(FaultError):
        FaultInjector().inject_error(*bad)


@pytest.mark.parametrize("count", [0, -1, 1.5, True])
def test_counts_below_one_are_refused(count):
    with pytest.raises(FaultError):
        FaultInjector().inject_error("Produce", 6, count=count)


def test_an_idle_injector_is_inactive_and_recording_makes_it_active():
    assert FaultInjector().active is False
    assert FaultInjector(record_requests=True).active is True


def test_an_error_rule_takes_exactly_count_requests_of_its_api_then_the_injector_goes_idle():
    injector = FaultInjector()
    injector.inject_error("Produce", "NOT_LEADER_OR_FOLLOWER", count=2)
    assert injector.active
    assert injector.on_request(header(METADATA), MetadataRequest(), "p") is None  # other APIs pass
    faults = [injector.on_request(header(PRODUCE), produce("t"), "p") for _ in range(3)]
    assert [f.error if f else None for f in faults] == [ErrorCode.NOT_LEADER_OR_FOLLOWER] * 2 + [None]
    assert injector.active is False
    assert injector.faults() == {"errors": [], "latency": [], "drops": []}


def test_a_topic_filter_counts_only_requests_naming_that_topic():
    injector = FaultInjector()
    injector.inject_error("Produce", "UNKNOWN_TOPIC_OR_PARTITION", count=1, topic="orders")
    assert injector.on_request(header(PRODUCE), produce("payments"), "p") is None
    fault = injector.on_request(header(PRODUCE), produce("payments", "orders"), "p")
    assert fault.error is ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    assert injector.on_request(header(PRODUCE), produce("orders"), "p") is None


def test_rules_apply_in_the_order_they_were_added_one_per_request():
    injector = FaultInjector()
    injector.inject_error("Produce", "NOT_LEADER_OR_FOLLOWER", count=1)
    injector.inject_error("Produce", "REQUEST_TIMED_OUT", count=1)
    errors = [injector.on_request(header(PRODUCE), produce("t"), "p").error for _ in range(2)]
    assert errors == [ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.REQUEST_TIMED_OUT]


def test_a_rule_without_count_stays_until_cleared():
    injector = FaultInjector()
    injector.inject_error("Fetch", "NOT_LEADER_OR_FOLLOWER", count=None)
    for _ in range(5):
        assert injector.on_request(header(FETCH), FetchRequest(), "p").error is ErrorCode.NOT_LEADER_OR_FOLLOWER
    injector.clear_faults()
    assert injector.on_request(header(FETCH), FetchRequest(), "p") is None
    assert not injector.active


def test_latency_per_api_takes_precedence_over_latency_for_all_and_can_be_removed():
    injector = FaultInjector()
    injector.inject_latency(None, 10)
    injector.inject_latency("Produce", 250)
    assert injector.on_request(header(PRODUCE), produce("t"), "p").delay_s == pytest.approx(0.25)
    assert injector.on_request(header(METADATA), MetadataRequest(), "p").delay_s == pytest.approx(0.01)
    injector.inject_latency("Produce", 0)
    assert injector.on_request(header(PRODUCE), produce("t"), "p").delay_s == pytest.approx(0.01)
    injector.inject_latency(None, 0)
    assert injector.on_request(header(PRODUCE), produce("t"), "p") is None


def test_latency_and_an_error_combine_on_one_request():
    injector = FaultInjector()
    injector.inject_latency("Produce", 100, count=1)
    injector.inject_error("Produce", "NOT_ENOUGH_REPLICAS")
    fault = injector.on_request(header(PRODUCE), produce("t"), "p")
    assert (fault.delay_s, fault.error, fault.drop) == (pytest.approx(0.1), ErrorCode.NOT_ENOUGH_REPLICAS, False)
    assert injector.on_request(header(PRODUCE), produce("t"), "p") is None


def test_drop_rules_serve_after_requests_then_drop_count_times():
    injector = FaultInjector()
    injector.drop_connections_after(after=2, api="Produce", count=2)
    outcomes = []
    for _ in range(7):
        injector.on_request(header(METADATA), MetadataRequest(), "p")  # not counted: another API
        fault = injector.on_request(header(PRODUCE), produce("t"), "p")
        outcomes.append(bool(fault and fault.drop))
    assert outcomes == [False, False, True, False, False, True, False]


def test_the_request_log_records_api_version_client_and_fault_numbered_in_order():
    injector = FaultInjector(record_requests=True)
    injector.on_request(header(METADATA, version=12, correlation_id=7, client_id="app"),
                        MetadataRequest(topics=[MetadataRequest.MetadataRequestTopic(name="t")]), "1.2.3.4:5")
    injector.inject_error("Produce", "NOT_LEADER_OR_FOLLOWER")
    injector.on_request(header(PRODUCE, correlation_id=8), produce("t"), "1.2.3.4:5")
    injector.drop_connections_after(0)
    injector.on_request(header(PRODUCE, correlation_id=9), produce("t"), "1.2.3.4:5")
    first, second, third = injector.requests()
    assert (first.seq, first.api, first.api_key, first.api_version, first.client_id, first.correlation_id,
            first.peer, first.topics, first.served) == (1, "Metadata", 3, 12, "app", 7, "1.2.3.4:5", ("t",), True)
    assert (second.api, second.injected_error, second.served) == ("Produce", "NOT_LEADER_OR_FOLLOWER", False)
    assert (third.dropped, third.served) == (True, False)
    assert [entry.seq for entry in injector.requests(since=1, api="Produce")] == [2, 3]
    assert RequestLogEntry.from_dict(second.to_dict()) == second


def test_the_request_log_says_which_node_served_each_request():
    injector = FaultInjector(record_requests=True)
    injector.on_request(header(METADATA), MetadataRequest(), "p", node_id=2)
    injector.on_unserved(header(PRODUCE, version=99), "p", node_id=0)
    assert [(entry.api, entry.node_id, entry.served) for entry in injector.requests()] == [
        ("Metadata", 2, True), ("Produce", 0, False)]
    assert RequestLogEntry.from_dict(injector.requests()[0].to_dict()).node_id == 2


def test_the_request_log_keeps_only_the_newest_entries():
    injector = FaultInjector(record_requests=True, log_size=3)
    for correlation_id in range(5):
        injector.on_request(header(METADATA, correlation_id=correlation_id), MetadataRequest(), "p")
    assert [entry.correlation_id for entry in injector.requests()] == [2, 3, 4]
    assert injector.last_seq == 5
    injector.clear_requests()
    assert injector.requests() == []


def test_request_topics_reads_names_ids_and_nested_groups():
    known = uuid.uuid4()

    class Info:
        name = "by-id"

    fetch = FetchRequest(topics=[FetchRequest.FetchTopic(topic="a"), FetchRequest.FetchTopic(topic_id=known),
                                 FetchRequest.FetchTopic(topic_id=uuid.uuid4())])
    assert request_topics(fetch, lambda topic_id: Info if topic_id == known else None) == ("a", "by-id")
    assert request_topics(DeleteTopicsRequest(topic_names=["x", "y"])) == ("x", "y")
    offset_fetch = OffsetFetchRequest(groups=[OffsetFetchRequest.OffsetFetchRequestGroup(
        group_id="g", topics=[OffsetFetchRequest.OffsetFetchRequestTopics(name="z")])])
    assert request_topics(offset_fetch) == ("z",)
    assert request_topics(MetadataRequest(topics=None)) == ()

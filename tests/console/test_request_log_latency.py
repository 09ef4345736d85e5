"""The request log's latency and error (FaultInjector.on_response, called by the connection once it answered)."""
from __future__ import annotations

from compatbroker.protocol.messages import MetadataRequest
from compatbroker.toolkit.faults import FaultInjector, RequestLogEntry
from tests.toolkit.test_faults import METADATA, PRODUCE, header, produce


def test_an_answered_request_gets_its_latency_and_the_name_of_its_error():
    injector = FaultInjector(record_requests=True)
    injector.on_request(header(METADATA, correlation_id=1), MetadataRequest(), "1.2.3.4:5", node_id=0)
    injector.on_request(header(PRODUCE, correlation_id=2), produce("t"), "1.2.3.4:5", node_id=0)
    injector.on_response(header(PRODUCE, correlation_id=2), "1.2.3.4:5", node_id=0, latency_s=0.0123,
                         error_code=6)
    injector.on_response(header(METADATA, correlation_id=1), "1.2.3.4:5", node_id=0, latency_s=0.0005,
                         error_code=0)
    metadata, produced = injector.requests()
    assert (metadata.latency_ms, metadata.error) == (0.5, None)
    assert (produced.latency_ms, produced.error) == (12.3, "NOT_LEADER_OR_FOLLOWER")
    assert RequestLogEntry.from_dict(produced.to_dict()) == produced


def test_a_request_not_answered_yet_has_no_latency_and_old_dicts_still_load():
    injector = FaultInjector(record_requests=True)
    injector.on_request(header(METADATA), MetadataRequest(), "p", node_id=0)
    entry = injector.requests()[0]
    assert (entry.latency_ms, entry.error) == (None, None)
    old = {key: value for key, value in entry.to_dict().items() if key not in ("latency_ms", "error")}
    assert RequestLogEntry.from_dict(old) == entry


def test_responses_match_requests_by_node_peer_and_correlation_id():
    injector = FaultInjector(record_requests=True)
    for node_id in (0, 1):
        injector.on_request(header(METADATA, correlation_id=7), MetadataRequest(), "p", node_id=node_id)
    injector.on_response(header(METADATA, correlation_id=7), "p", node_id=1, latency_s=0.002, error_code=0)
    injector.on_response(header(METADATA, correlation_id=7), "other", node_id=0, latency_s=0.009, error_code=0)
    assert [entry.latency_ms for entry in injector.requests()] == [None, 2.0]


def test_an_unknown_error_code_is_named_by_its_number_and_entries_gone_from_the_log_are_ignored():
    injector = FaultInjector(record_requests=True, log_size=2)
    for correlation_id in range(3):
        injector.on_request(header(METADATA, correlation_id=correlation_id), MetadataRequest(), "p", node_id=0)
    injector.on_response(header(METADATA, correlation_id=0), "p", node_id=0, latency_s=0.001, error_code=0)
    injector.on_response(header(METADATA, correlation_id=2), "p", node_id=0, latency_s=0.001, error_code=9999)
    assert [(entry.correlation_id, entry.error) for entry in injector.requests()] == [
        (1, None), (2, "UNKNOWN_ERROR_CODE_9999")]


def test_dropped_requests_are_not_awaited_and_a_broker_not_recording_keeps_nothing():
    injector = FaultInjector(record_requests=True)
    injector.drop_connections_after(0)
    injector.on_request(header(METADATA), MetadataRequest(), "p", node_id=0)
    assert injector._in_flight == {}
    quiet = FaultInjector()
    quiet.inject_error("Produce", "NOT_LEADER_OR_FOLLOWER")
    quiet.on_request(header(PRODUCE), produce("t"), "p", node_id=0)
    quiet.on_response(header(PRODUCE), "p", node_id=0, latency_s=0.001, error_code=6)
    assert quiet.requests() == [] and quiet._in_flight == {}


def test_recent_requests_are_the_newest_first_of_one_api_when_asked():
    injector = FaultInjector(record_requests=True)
    for correlation_id in range(6):
        api = PRODUCE if correlation_id % 2 else METADATA
        body = produce("t") if api == PRODUCE else MetadataRequest()
        injector.on_request(header(api, correlation_id=correlation_id), body, "p", node_id=0)
    assert [entry.correlation_id for entry in injector.recent_requests(2)] == [5, 4]
    assert [entry.correlation_id for entry in injector.recent_requests(10, "Produce")] == [5, 3, 1]

"""The public interface of the protocol package: headers, versions, errors and file-region chunks."""
from __future__ import annotations

import uuid

import pytest

from compatbroker.protocol import (DecodeError, EncodeError, FileRegion, RequestHeader, ResponseHeader,
                                   UnsupportedVersionError, decode_request, decode_request_header, decode_response,
                                   encode_request, encode_response, encode_response_chunks, request_header_version,
                                   response_header_version)
from compatbroker.protocol.messages import (ApiVersionsRequest, ApiVersionsResponse, FetchRequest, FetchResponse,
                                            MetadataRequest, ProduceRequest)


def header(api_key, version, correlation_id=42, client_id="test-client"):
    return RequestHeader(request_api_key=api_key, request_api_version=version, correlation_id=correlation_id,
                         client_id=client_id)


def test_request_round_trip_and_header_fields():
    body = MetadataRequest(topics=[MetadataRequest.MetadataRequestTopic(name="orders")],
                           allow_auto_topic_creation=True)
    frame = encode_request(header(3, 12), body)
    hdr, decoded = decode_request(frame)
    assert (hdr.api_key, hdr.api_version, hdr.correlation_id, hdr.client_id) == (3, 12, 42, "test-client")
    assert decoded == body


def test_header_versions_follow_flexibility_and_the_api_versions_quirk():
    assert request_header_version(0, 8) == 1 and request_header_version(0, 9) == 2
    assert response_header_version(0, 8) == 0 and response_header_version(0, 9) == 1
    # ApiVersions: flexible request header from v3, but the response header is always v0.
    assert request_header_version(18, 3) == 2
    assert response_header_version(18, 3) == 0 and response_header_version(18, 4) == 0
    data = encode_response(18, 3, 9, ApiVersionsResponse(error_code=0))
    assert data[:4] == b"\x00\x00\x00\x09" and data[4:6] == b"\x00\x00"  # correlation id, then error code directly


def test_null_client_id_and_header_tags_survive():
    hdr = header(18, 3, client_id=None)
    hdr.unknown_tagged_fields = {5: b"\x01\x02"}
    frame = encode_request(hdr, ApiVersionsRequest(client_software_name="x", client_software_version="1"))
    decoded_header, _ = decode_request(frame)
    assert decoded_header.client_id is None and decoded_header.unknown_tagged_fields == {5: b"\x01\x02"}
    assert encode_request(decoded_header, decode_request(frame)[1]) == frame


def test_newer_api_versions_request_keeps_a_readable_header():
    frame = encode_request(header(18, 4, correlation_id=77), ApiVersionsRequest())
    frame = frame[:2] + b"\x00\x63" + frame[4:]  # claim version 99
    with pytest.raises(UnsupportedVersionError) as info:
        decode_request(frame)
    assert info.value.header.correlation_id == 77 and info.value.header.api_version == 99
    hdr, pos = decode_request_header(frame)
    assert hdr.api_key == 18 and pos > 8


def test_unknown_api_key_is_an_unsupported_version_with_partial_header():
    frame = b"\x03\xe7\x00\x00\x00\x00\x00\x05\x00\x00"
    with pytest.raises(UnsupportedVersionError) as info:
        decode_request(frame)
    assert isinstance(info.value, DecodeError)
    assert (info.value.header.api_key, info.value.header.correlation_id) == (999, 5)


def test_decode_error_names_api_version_and_field():
    body = ProduceRequest(acks=1, timeout_ms=100, topic_data=[ProduceRequest.TopicProduceData(
        name="t", partition_data=[ProduceRequest.PartitionProduceData(index=0, records=b"x" * 50)])])
    frame = encode_request(header(0, 7), body)
    with pytest.raises(DecodeError) as info:
        decode_request(frame[:-10])
    message = str(info.value)
    assert "ProduceRequest v7" in message and "topic_data[0].partition_data[0].records" in message


def test_records_decode_as_views_of_the_frame():
    body = ProduceRequest(acks=1, timeout_ms=100, topic_data=[ProduceRequest.TopicProduceData(
        name="t", partition_data=[ProduceRequest.PartitionProduceData(index=0, records=b"batch-bytes")])])
    frame = encode_request(header(0, 9), body)
    _, decoded = decode_request(frame)
    records = decoded.topic_data[0].partition_data[0].records
    assert isinstance(records, memoryview) and records.obj is frame and records == b"batch-bytes"


def test_encode_rejects_values_the_version_cannot_carry():
    with pytest.raises(EncodeError, match="transactional_id"):
        encode_request(header(0, 2), ProduceRequest(transactional_id="tx"))
    with pytest.raises(EncodeError, match="ProduceRequest v3"):
        encode_request(header(0, 3), ProduceRequest(acks=1 << 20))
    with pytest.raises(EncodeError):
        encode_request(header(0, 3), MetadataRequest())


@pytest.mark.parametrize("version", [4, 11, 12, 13, 16, 18])
def test_fetch_response_chunks_splice_file_regions(version, tmp_path):
    path = tmp_path / "segment.log"
    path.write_bytes(b"A" * 100 + b"B" * 30 + b"C" * 40)
    topic_field = {"topic": "events"} if version < 13 else {"topic_id": uuid.UUID(int=7)}
    with open(path, "rb") as f:
        regions = [FileRegion(f.fileno(), 100, 30), FileRegion(f.fileno(), 130, 40)]
        response = FetchResponse(responses=[FetchResponse.FetchableTopicResponse(**topic_field, partitions=[
            FetchResponse.PartitionData(partition_index=i, high_watermark=5, records=r)
            for i, r in enumerate(regions)])])
        chunks = encode_response_chunks(1, version, 3, response)
        assert sum(isinstance(c, FileRegion) for c in chunks) == 2
        flat = b"".join(c if isinstance(c, bytes) else _read(f, c) for c in chunks)
    assert int.from_bytes(flat[:4], "big") == len(flat) - 4
    _, decoded = decode_response(1, version, flat[4:])
    assert [bytes(p.records) for p in decoded.responses[0].partitions] == [b"B" * 30, b"C" * 40]
    with pytest.raises(EncodeError):
        encode_response(1, version, 3, response)


def _read(f, region):
    f.seek(region.position)
    return f.read(region.length)


def test_response_header_object_or_correlation_id():
    body = ApiVersionsResponse(error_code=35, api_keys=[ApiVersionsResponse.ApiVersion(api_key=18, min_version=0,
                                                                                         max_version=4)])
    assert encode_response(18, 0, ResponseHeader(correlation_id=5), body) == encode_response(18, 0, 5, body)
    hdr, decoded = decode_response(18, 0, encode_response(18, 0, 5, body))
    assert hdr.correlation_id == 5 and decoded == body


def test_fetch_request_max_version_round_trip():
    body = FetchRequest(max_wait_ms=500, min_bytes=1, max_bytes=1 << 20, session_id=3, session_epoch=1,
                        topics=[FetchRequest.FetchTopic(topic_id=uuid.uuid4(), partitions=[
                            FetchRequest.FetchPartition(partition=0, fetch_offset=10, partition_max_bytes=1000)])])
    frame = encode_request(header(1, 18), body)
    assert decode_request(frame)[1] == body


def test_importing_the_package_loads_only_what_is_used():
    import subprocess
    import sys
    code = ("import sys, compatbroker.protocol as p; "
            "loaded = [m for m in sys.modules if m.startswith('compatbroker.protocol.messages.')]; "
            "p.API_KEYS[0]; "
            "after = [m for m in sys.modules if m.startswith('compatbroker.protocol.messages.')]; "
            "print(len(loaded), len(after), 'compatbroker.protocol.messages.produce' in after)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()
    assert out == ["2", "3", "True"]  # the two header modules, then produce on first use


def test_unsigned_varints_are_limited_to_32_bits():
    from compatbroker.protocol.wire import read_uvarint
    assert read_uvarint(b"\xff\xff\xff\xff\x0f", 0) == (0xFFFFFFFF, 5)
    with pytest.raises(ValueError):
        read_uvarint(b"\xff\xff\xff\xff\x7f", 0)
    with pytest.raises(ValueError):
        read_uvarint(b"\xff\xff\xff\xff\xff\x01", 0)

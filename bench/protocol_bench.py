"""Protocol codec benchmark.

    python bench/protocol_bench.py

Prints (1) the time to decode a Produce v9 request carrying one 1 MiB record batch, and (2) the time to encode the
part of a Fetch v12 response that precedes the record bytes for one partition, whose records are a file region sent
later with os.sendfile. Target on CPython 3.11 here: each <= 20 microseconds. It also checks that the decoded records
are a memoryview over the request frame (the batch bytes are never copied), and compares with kafka-python's codec
measured in the same run.
"""
from __future__ import annotations

import os
import sys
import tempfile
import timeit
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from compatbroker.protocol import (FileRegion, RequestHeader, decode_request, decode_request_header,  # noqa: E402
                                   encode_request, encode_response_chunks)
from compatbroker.protocol.messages import FetchResponse, ProduceRequest  # noqa: E402

TARGET_US = 20.0
BATCH = os.urandom(1 << 20)


def produce_frame() -> bytes:
    body = ProduceRequest(transactional_id=None, acks=-1, timeout_ms=30000, topic_data=[
        ProduceRequest.TopicProduceData(name="events", partition_data=[
            ProduceRequest.PartitionProduceData(index=0, records=BATCH)])])
    header = RequestHeader(request_api_key=0, request_api_version=9, correlation_id=7, client_id="bench")
    return encode_request(header, body)


def fetch_response(region) -> FetchResponse:
    return FetchResponse(throttle_time_ms=0, error_code=0, session_id=0, responses=[
        FetchResponse.FetchableTopicResponse(topic="events", partitions=[
            FetchResponse.PartitionData(partition_index=0, error_code=0, high_watermark=1000,
                                        last_stable_offset=1000, log_start_offset=0, aborted_transactions=None,
                                        preferred_read_replica=-1, records=region)])])


def best_of(fn, number, repeat=7) -> float:
    return min(timeit.repeat(fn, number=number, repeat=repeat)) / number * 1e6


def main() -> int:
    frame = produce_frame()
    header, body = decode_request(frame)
    records = body.topic_data[0].partition_data[0].records
    zero_copy = isinstance(records, memoryview) and records.obj is frame
    decode_us = best_of(lambda: decode_request(frame), 2000)

    with tempfile.TemporaryFile() as f:
        region = FileRegion(f.fileno(), 0, 1 << 20)
        response = fetch_response(region)
        encode_us = best_of(lambda: encode_response_chunks(1, 12, 7, response), 2000)
        chunks = encode_response_chunks(1, 12, 7, response)
    head_bytes = sum(len(c) for c in chunks if not isinstance(c, FileRegion))

    print(f"decode Produce v9 request, one 1 MiB batch : {decode_us:7.2f} us  (target <= {TARGET_US:.0f} us)"
          f"  batch copied: {'no' if zero_copy else 'YES'}")
    print(f"encode Fetch v12 response head, 1 partition: {encode_us:7.2f} us  (target <= {TARGET_US:.0f} us)"
          f"  {head_bytes} bytes + file region of {region.length} bytes")
    peer = kafka_python_figures(frame)
    if peer:
        print(f"kafka-python for comparison: decode {peer[0]:.2f} us (ratio {peer[0] / decode_us:.1f}x slower),"
              f" encode Fetch v12 response with the 1 MiB records in memory {peer[1]:.2f} us")
    ok = decode_us <= TARGET_US and encode_us <= TARGET_US and zero_copy
    print("targets met" if ok else "TARGETS MISSED")
    return 0 if ok else 1


def kafka_python_figures(frame):
    try:
        from kafka.protocol.consumer import FetchResponse as KFetch
        from kafka.protocol.producer import ProduceRequest as KProduce
    except ImportError:
        print("kafka-python not installed: no comparison figures (pip install kafka-python)")
        return None
    body = memoryview(frame)[decode_request_header(frame)[1]:]
    decode = best_of(lambda: KProduce.decode(body, version=9), 200)
    resp = KFetch(version=12, throttle_time_ms=0, error_code=0, session_id=0, responses=[
        KFetch.FetchableTopicResponse(version=12, topic="events", partitions=[
            KFetch.FetchableTopicResponse.PartitionData(
                version=12, partition_index=0, error_code=0, high_watermark=1000, last_stable_offset=1000,
                log_start_offset=0, aborted_transactions=None, preferred_read_replica=-1, records=BATCH)])])
    encode = best_of(lambda: resp.encode(version=12), 200)
    return decode, encode


if __name__ == "__main__":
    sys.exit(main())

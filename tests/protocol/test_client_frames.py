"""Request frames recorded from real clients must survive our codec byte for byte.

The frames in tests/data/client_frames/<client>/<Api>__v<version>__<n>.bin were sent by kafka-python,
aiokafka, confluent-kafka, kcat and kafkajs (see tests/compat/record_client_frames.py, which re-records them).
Each one must decode and re-encode to the identical bytes, and every Produce frame must carry exactly the
records its flow sent (listed in manifest.json) with the codec the flow asked for.
"""
import base64
import json
import re
import struct
from pathlib import Path

import pytest

from compatbroker.protocol import decode_request, encode_request
from compatbroker.protocol import records

DATA = Path(__file__).resolve().parents[1] / "data" / "client_frames"
MANIFEST = DATA / "manifest.json"
RERECORD = "re-record with: python tests/compat/record_client_frames.py"
FRAME_NAME = re.compile(r"^(?P<api>[A-Za-z]+)__v(?P<version>\d+)__\d+\.bin$")
MAX_UNCOMPRESSED = 1 << 20  # the recorded batches are a few hundred bytes

# Kafka's API names as used in the file names, for the APIs the clients were seen to send.
API_KEYS = {
    "Produce": 0, "Fetch": 1, "ListOffsets": 2, "Metadata": 3, "OffsetCommit": 8, "OffsetFetch": 9,
    "FindCoordinator": 10, "JoinGroup": 11, "Heartbeat": 12, "LeaveGroup": 13, "SyncGroup": 14,
    "DescribeGroups": 15, "ListGroups": 16, "ApiVersions": 18, "CreateTopics": 19, "DeleteTopics": 20,
    "InitProducerId": 22, "AddPartitionsToTxn": 24, "AddOffsetsToTxn": 25, "EndTxn": 26, "TxnOffsetCommit": 28,
    "DescribeConfigs": 32, "DescribeCluster": 60, "ConsumerGroupHeartbeat": 68, "ConsumerGroupDescribe": 69,
}


def recorded_frames():
    return sorted(DATA.glob("*/*.bin"))


def load_manifest():
    if not MANIFEST.is_file():
        pytest.fail(f"{MANIFEST} is missing; {RERECORD}")
    return json.loads(MANIFEST.read_text())


# When the data is missing, parametrize with one placeholder that fails: an empty parameter set would
# only be skipped, and a missing data set must not pass unnoticed.
MISSING = pytest.param(None, id="no-recorded-data")


def frame_params():
    frames = recorded_frames()
    if not frames:
        return [MISSING]
    return [pytest.param(path, id=f"{path.parent.name}/{path.stem}") for path in frames]


def produce_params():
    if not MANIFEST.is_file():
        return [MISSING]
    cases = [pytest.param((flow, entry), id=f"{flow['client']}/{Path(entry['file']).stem}")
             for flow in json.loads(MANIFEST.read_text())["produce_flows"] for entry in flow["frames"]]
    return cases or [MISSING]


def require(case):
    if case is None:
        pytest.fail(f"no recorded client frames under {DATA}; {RERECORD}")
    return case


def test_recorded_data_is_present():
    clients = {path.parent.name for path in recorded_frames()}
    assert clients >= {"kafka-python", "aiokafka", "confluent-kafka", "kcat", "kafkajs"}, RERECORD
    manifest = load_manifest()
    assert {flow["client"] for flow in manifest["produce_flows"]} == clients


@pytest.mark.parametrize("path", frame_params())
def test_frame_decodes_and_reencodes_identically(path):
    frame = require(path).read_bytes()
    match = FRAME_NAME.match(path.name)
    assert match, f"unexpected file name {path.name}"
    assert match["api"] in API_KEYS, f"add {match['api']}'s key to API_KEYS"
    expected = (API_KEYS[match["api"]], int(match["version"]))

    header, body = decode_request(frame)

    assert (header.api_key, header.api_version) == expected
    assert header.correlation_id == struct.unpack_from(">i", frame, 4)[0]
    assert header.client_id == raw_client_id(frame)
    assert encode_request(header, body) == frame


def test_every_produce_frame_is_described_in_the_manifest():
    produce_files = {f"{p.parent.name}/{p.name}" for p in recorded_frames() if p.name.startswith("Produce__")}
    assert produce_files, f"no Produce frames recorded; {RERECORD}"
    described = {f"{flow['client']}/{entry['file']}"
                 for flow in load_manifest()["produce_flows"] for entry in flow["frames"]}
    assert described == produce_files


def test_each_produce_flow_is_covered_by_its_frames():
    for flow in load_manifest()["produce_flows"]:
        covered = [entry["records"] for entry in flow["frames"]]
        ends = [0] + [end for _, end in covered]
        assert [start for start, _ in covered] == ends[:-1], flow["flow"]
        assert ends[-1] == len(flow["records"]), f"{flow['client']} {flow['flow']} lost records"


@pytest.mark.parametrize("case", produce_params())
def test_produce_frame_carries_the_records_sent(case):
    flow, entry = require(case)
    frame = (DATA / flow["client"] / entry["file"]).read_bytes()
    start, end = entry["records"]
    expected = [manifest_record(r) for r in flow["records"][start:end]]

    _, body = decode_request(frame)

    assert body.acks == flow["acks"]
    assert [topic.name for topic in body.topic_data] == [flow["topic"]]
    partitions = body.topic_data[0].partition_data
    assert [p.index for p in partitions] == [0]
    batches = decode_records(partitions[0].records)
    assert {codec for codec, _, _ in batches} == {records.Compression[flow["codec"].upper()]}
    assert {producer_id >= 0 for _, producer_id, _ in batches} == {flow["idempotent"]}
    got = [record for _, _, batch in batches for record in batch]
    assert [r.offset for r in got] == list(range(len(got)))  # producers number records from 0
    assert [comparable(r, flow.get("timestamp_window")) for r in got] == expected


def decode_records(buf):
    """[(codec, producer id, [Record])] per batch (v2) or per top-level message (v0/v1) of a partition."""
    view = memoryview(buf)
    assert len(view) > 16, "records field too short to hold a batch"
    if view[16] >= 2:  # magic byte, at the same place in every format
        out = []
        for pos, header in records.iter_batches(view):
            batch = view[pos:pos + header.size]
            records.validate_batch(batch, deep=True, max_size=MAX_UNCOMPRESSED)
            out.append((header.compression, header.producer_id,
                        list(records.iter_records(batch, max_size=MAX_UNCOMPRESSED))))
        return out
    return [(codec, -1, [records.Record(m.offset, m.timestamp, m.key, m.value) for m in messages])
            for codec, messages in records.iter_legacy_entries(view, max_size=MAX_UNCOMPRESSED)]


def comparable(record, timestamp_window):
    """(key, value, headers, timestamp) as plain bytes; a timestamp the client chose itself is checked against
    the window it was recorded in and compared as None."""
    timestamp = record.timestamp
    if timestamp_window is not None:
        low, high = timestamp_window
        assert low <= timestamp <= high, f"timestamp {timestamp} outside the recording window {timestamp_window}"
        timestamp = None
    headers = [(name, as_bytes(value)) for name, value in record.headers]
    return as_bytes(record.key), as_bytes(record.value), headers, timestamp


def manifest_record(entry):
    headers = [(name, from_b64(value)) for name, value in entry["headers"]]
    return from_b64(entry["key"]), from_b64(entry["value"]), headers, entry["timestamp"]


def from_b64(text):
    return None if text is None else base64.b64decode(text)


def as_bytes(data):
    return None if data is None else bytes(data)


def raw_client_id(frame):
    """The client id straight from the frame: an int16 length (-1 for null) then UTF-8, in every header version."""
    (length,) = struct.unpack_from(">h", frame, 8)
    return None if length < 0 else frame[10:10 + length].decode("utf-8")

"""Calling handlers the way the server does: the request goes through the codec (so it holds exactly what a client
of that version can send), the handler runs, and the response is encoded and decoded again (so it is valid for the
version), with file regions read back from the segment files."""
from __future__ import annotations

import os
from dataclasses import dataclass

from compatbroker.broker import Broker
from compatbroker.config import BrokerConfig
from compatbroker.handlers import HANDLERS, RequestContext
from compatbroker.protocol import (FileRegion, RequestHeader, decode_request, decode_response, encode_request,
                                   encode_response_chunks)
from compatbroker.protocol.records.batch import build_batch, iter_batches, iter_records

CORRELATION_ID = 41


@dataclass
class Answer:
    raw: object      # what the handler returned (records may be FileRegions)
    decoded: object  # the same after encoding and decoding: what the client reads


def make_broker(data_dir, **properties) -> Broker:
    """A started Broker on `data_dir` with Kafka-named config properties."""
    broker = Broker(BrokerConfig({"log.dirs": str(data_dir), **properties}))
    broker.startup()
    return broker


def context(broker, api_key: int, version: int, *, client_id: str = "handler-tests") -> RequestContext:
    header = RequestHeader(request_api_key=api_key, request_api_version=version, correlation_id=CORRELATION_ID,
                           client_id=client_id)
    return RequestContext(broker, header, peer="127.0.0.1:50000", listener_host="localhost", listener_port=9092)


def as_received(api_key: int, version: int, request, client_id: str = "handler-tests"):
    """The request after encoding and decoding at `version`."""
    header = RequestHeader(request_api_key=api_key, request_api_version=version, correlation_id=CORRELATION_ID,
                           client_id=client_id)
    return decode_request(encode_request(header, request))[1]


def start(broker, version: int, request, *, client_id: str = "handler-tests"):
    """The handler coroutine, not yet awaited (long-poll tests schedule it as a task)."""
    api_key = type(request).API_KEY
    body = as_received(api_key, version, request, client_id)
    return HANDLERS[api_key].handle(context(broker, api_key, version, client_id=client_id), body)


async def call(broker, version: int, request, *, client_id: str = "handler-tests") -> Answer | None:
    raw = await start(broker, version, request, client_id=client_id)
    if raw is None:
        return None
    return Answer(raw, on_the_wire(type(request).API_KEY, version, raw))


def on_the_wire(api_key: int, version: int, response):
    """Encode the response as the server sends it (file regions included) and decode it as a client would."""
    chunks = encode_response_chunks(api_key, version, CORRELATION_ID, response)
    data = b"".join(os.pread(c.file.fileno(), c.length, c.position) if isinstance(c, FileRegion) else c
                    for c in chunks)
    header, body = decode_response(api_key, version, data[4:])
    assert header.correlation_id == CORRELATION_ID
    assert int.from_bytes(data[:4], "big") == len(data) - 4
    return body


def batch(*values, timestamp: int | None = None, key: bytes | None = b"k", **options) -> bytes:
    """A v2 batch of records with these values."""
    import time
    stamp = int(time.time() * 1000) if timestamp is None else timestamp
    return build_batch([(key, value, (), stamp) for value in values], **options)


def records_of(data) -> list:
    """The Records in a v2 records buffer."""
    view = memoryview(bytes(data))
    return [record for position, header in iter_batches(view)
            for record in iter_records(view[position:position + header.size], max_size=2**31 - 1)]


def fail_partition_creation(monkeypatch, *, after: int, errno_code: int = 24) -> list[str]:
    """From the (after+1)-th partition log opened on, `Log.open` raises OSError(errno_code) (24: EMFILE), as when
    the broker runs out of file descriptors halfway through creating partitions. Returns the directories it
    refused, in order."""
    from compatbroker.storage.log import Log

    original = Log.open
    opened: list[str] = []
    refused: list[str] = []

    def open_or_fail(path, *args, **kwargs):
        if len(opened) >= after:
            refused.append(os.path.basename(path))
            raise OSError(errno_code, os.strerror(errno_code), path)
        opened.append(path)
        return original(path, *args, **kwargs)

    monkeypatch.setattr(Log, "open", staticmethod(open_or_fail))
    return refused

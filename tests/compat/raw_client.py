"""Requests over one plain socket, encoded and decoded with compatbroker's own codec: for tests that need a request
no client library sends as they want it (a resent batch, a Fetch under strace)."""
from __future__ import annotations

import socket
import struct

from compatbroker.protocol import RequestHeader, decode_response, encode_request

from .broker_process import BrokerProcess

_SIZE = struct.Struct(">i")


class RawClient:
    """One connection; each call sends a request and reads its response (correlation ids 1, 2, ...)."""

    def __init__(self, broker: BrokerProcess, client_id: str):
        self.sock = socket.create_connection((broker.host, broker.port), timeout=15)
        self.client_id = client_id
        self.correlation_id = 0

    def __enter__(self) -> RawClient:
        return self

    def __exit__(self, *exc_info) -> None:
        self.close()

    def call(self, body, version: int):
        self.correlation_id += 1
        header = RequestHeader(request_api_key=body.API_KEY, request_api_version=version,
                               correlation_id=self.correlation_id, client_id=self.client_id)
        frame = encode_request(header, body)
        self.sock.sendall(_SIZE.pack(len(frame)) + frame)
        (size,) = _SIZE.unpack(self._read(_SIZE.size))
        response_header, response = decode_response(body.API_KEY, version, self._read(size))
        assert response_header.correlation_id == self.correlation_id
        return response

    def close(self) -> None:
        self.sock.close()

    def _read(self, count: int) -> bytes:
        """Exactly `count` bytes, received into one buffer (a Fetch response may be tens of MiB)."""
        buffer = bytearray(count)
        view = memoryview(buffer)
        got = 0
        while got < count:
            received = self.sock.recv_into(view[got:], count - got)
            assert received, "the broker closed the connection"
            got += received
        return bytes(buffer)

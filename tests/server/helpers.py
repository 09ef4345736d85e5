"""Shared pieces of the server tests: a broker and server on a free port in a temp dir, and a raw client."""
from __future__ import annotations

import asyncio
import contextlib
import struct
import types

from compatbroker.broker import Broker
from compatbroker.config import BrokerConfig
from compatbroker.handlers import api_versions, build_registry
from compatbroker.protocol import RequestHeader, decode_response, encode_request
from compatbroker.server import Server

_SIZE = struct.Struct(">i")


def make_config(tmp_path, **properties) -> BrokerConfig:
    settings = {"listeners": "PLAINTEXT://127.0.0.1:0", "log.dirs": str(tmp_path / "data")}
    settings.update({name.replace("_", "."): value for name, value in properties.items()})
    return BrokerConfig(settings)


def handler_module(api_key: int, handle, *, min_version: int = 0, max_version: int | None = None):
    """A handler module built in a test: any coroutine function serving `api_key`."""
    from compatbroker.protocol import API_KEYS

    module = types.ModuleType(f"test_handler_{api_key}")
    module.API_KEY = api_key
    module.MIN_VERSION = min_version
    module.MAX_VERSION = API_KEYS[api_key][0].VALID_VERSIONS[1] if max_version is None else max_version
    module.handle = handle
    return module


@contextlib.asynccontextmanager
async def running_server(tmp_path, handlers=None, **properties):
    """A started broker and server listening on 127.0.0.1:<free port>; yields (server, port)."""
    broker = Broker(make_config(tmp_path, **properties))
    broker.startup()
    registry = handlers if handlers is not None else build_registry([api_versions])
    server = Server(broker, registry)
    await server.start()
    try:
        yield server, server.listeners[0].port
    finally:
        await server.stop()
        await broker.shutdown()


class RawClient:
    """A client speaking frames over a plain TCP connection."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter):
        self.reader = reader
        self.writer = writer

    @classmethod
    async def connect(cls, port: int, host: str = "127.0.0.1") -> RawClient:
        reader, writer = await asyncio.open_connection(host, port)
        return cls(reader, writer)

    async def send_frame(self, frame: bytes) -> None:
        self.writer.write(_SIZE.pack(len(frame)) + frame)
        await self.writer.drain()

    async def send(self, body, *, version: int, correlation_id: int, client_id: str | None = "test-client"):
        header = RequestHeader(request_api_key=body.API_KEY, request_api_version=version,
                               correlation_id=correlation_id, client_id=client_id)
        await self.send_frame(encode_request(header, body))

    async def read_frame(self) -> bytes:
        (size,) = _SIZE.unpack(await self.reader.readexactly(4))
        return await self.reader.readexactly(size)

    async def read_response(self, api_key: int, version: int):
        return decode_response(api_key, version, await self.read_frame())

    async def closed_by_server(self) -> bool:
        """True when the server closed the connection without sending anything more."""
        return await self.reader.read(1) == b""

    async def close(self) -> None:
        self.writer.close()
        with contextlib.suppress(OSError):
            await self.writer.wait_closed()

"""The public entry points of the protocol package: frames in, (header, body) out, and back.

Frames are passed without their 4-byte size prefix. Decoding never copies record bytes: `records` fields come back
as memoryviews over the frame. The generated codecs do the work; when one fails, the same input is run through the
reference codec so that the `DecodeError`/`EncodeError` raised names the API, the version and the field.
"""
from __future__ import annotations

import struct

from . import wire
from .exceptions import DecodeError, EncodeError, UnsupportedVersionError
from .messages import API_KEYS
from .messages.request_header import RequestHeader
from .messages.response_header import ResponseHeader

API_VERSIONS_KEY = 18
_api_key_and_version = struct.Struct(">hh").unpack_from
_i32 = struct.Struct(">i")


def api_name(api_key: int) -> str:
    """Kafka's name of an API (`Produce`, `SaslHandshake`), for log lines; `API key N` for one we do not know."""
    pair = API_KEYS.get(api_key)
    return pair[0].NAME.removesuffix("Request") if pair is not None else f"API key {api_key}"


def is_flexible(message_cls, version: int) -> bool:
    flex = message_cls.FLEXIBLE_VERSIONS
    return flex is not None and flex[0] <= version and (flex[1] is None or version <= flex[1])


def request_header_version(api_key: int, api_version: int) -> int:
    pair = API_KEYS.get(api_key)
    return 2 if pair is not None and is_flexible(pair[0], api_version) else 1


def response_header_version(api_key: int, api_version: int) -> int:
    # ApiVersions responses always use header v0, so that a client can read the answer before it knows which
    # versions the broker supports (KIP-511).
    if api_key == API_VERSIONS_KEY:
        return 0
    pair = API_KEYS.get(api_key)
    return 1 if pair is not None and is_flexible(pair[1], api_version) else 0


def _view(frame) -> memoryview:
    view = frame if isinstance(frame, memoryview) else memoryview(frame)
    if view.format != "B" or view.ndim != 1:
        view = view.cast("B")
    return view


def decode_request_header(frame):
    """Reads just the request header: returns (header, position of the body). The API key must be known; the
    version need not be (an ApiVersions request newer than ours still has a readable header)."""
    buf = _view(frame)
    if len(buf) < 4:
        raise DecodeError(f"request frame of {len(buf)} bytes is too short for a header")
    api_key, api_version = _api_key_and_version(buf, 0)
    pair = API_KEYS.get(api_key)
    if pair is None:
        raise UnsupportedVersionError(f"unknown API key {api_key} (version {api_version})",
                                      header=_partial_header(buf, api_key, api_version))
    hv = request_header_version(api_key, api_version)
    return _decode(RequestHeader, hv, buf, 0)


def decode_request(frame):
    """Decodes one request frame into (RequestHeader, request body). Trailing bytes after the body are ignored."""
    buf = _view(frame)
    header, pos = decode_request_header(buf)
    request_cls = API_KEYS[header.request_api_key][0]
    version = header.request_api_version
    if version not in request_cls.DECODERS:
        raise UnsupportedVersionError(f"{request_cls.NAME} version {version} is not supported", header=header)
    body, _ = _decode(request_cls, version, buf, pos)
    # Bytes after a complete request are ignored, as Apache Kafka's broker ignores them: librdkafka's Metadata
    # v9+ request for all topics ends with 3 stray bytes, and `kcat -L` must work.
    return header, body


def encode_request(header, body) -> bytes:
    """Encodes a request (without the size prefix). The header's api key and version select the codec."""
    api_key, version = header.request_api_key, header.request_api_version
    pair = API_KEYS.get(api_key)
    if pair is None or not isinstance(body, pair[0]):
        raise EncodeError(f"body {type(body).__name__} does not match API key {api_key}")
    out = wire.Out()
    _encode(RequestHeader, request_header_version(api_key, version), header, out)
    _encode(pair[0], version, body, out)
    return bytes(out)


def decode_response(api_key: int, api_version: int, frame):
    """Decodes one response frame (without size prefix) into (ResponseHeader, response body)."""
    buf = _view(frame)
    pair = API_KEYS.get(api_key)
    if pair is None or api_version not in pair[1].DECODERS:
        raise UnsupportedVersionError(f"API key {api_key} version {api_version} is not supported")
    header, pos = _decode(ResponseHeader, response_header_version(api_key, api_version), buf, 0)
    body, pos = _decode(pair[1], api_version, buf, pos)
    _expect_end(pair[1], api_version, buf, pos)
    return header, body


def encode_response(api_key: int, api_version: int, header, body) -> bytes:
    """Encodes a response (without the size prefix). `header` is a ResponseHeader or a correlation id. Records
    given as file regions are not allowed here: use `encode_response_chunks`."""
    out = _encode_response(api_key, api_version, header, body)
    if out.regions:
        raise EncodeError("the response holds file regions: use encode_response_chunks")
    return bytes(out)


def encode_response_chunks(api_key: int, api_version: int, header, body):
    """Encodes a response as a list of chunks, each `bytes` or a `FileRegion` (records to send with
    `os.sendfile`), the first chunk starting with the 4-byte size prefix of the whole frame."""
    out = _encode_response(api_key, api_version, header, body)
    size = len(out) + sum(region.length for _, region in out.regions)
    chunks = []
    start = 0
    prefix = _i32.pack(size)
    for pos, region in out.regions:
        chunks.append(prefix + out[start:pos] if prefix else bytes(out[start:pos]))
        prefix = b""
        chunks.append(region)
        start = pos
    chunks.append(prefix + out[start:] if prefix else bytes(out[start:]))
    return [c for c in chunks if isinstance(c, wire.FileRegion) or len(c)]


def _encode_response(api_key, api_version, header, body) -> wire.Out:
    pair = API_KEYS.get(api_key)
    if pair is None or not isinstance(body, pair[1]):
        raise EncodeError(f"body {type(body).__name__} does not match API key {api_key}")
    if isinstance(header, int):
        header = ResponseHeader(correlation_id=header)
    out = wire.Out()
    _encode(ResponseHeader, response_header_version(api_key, api_version), header, out)
    _encode(pair[1], api_version, body, out)
    return out


def decode_message(message_cls, version: int, data):
    """Decodes a standalone message (e.g. a record key or value of an internal topic) that must fill `data`."""
    buf = _view(data)
    obj, pos = _decode(message_cls, version, buf, 0)
    _expect_end(message_cls, version, buf, pos)
    return obj


def encode_message(message_cls, version: int, obj) -> bytes:
    out = wire.Out()
    _encode(message_cls, version, obj, out)
    return bytes(out)


def _decode(cls, version, buf, pos):
    decoder = cls.DECODERS.get(version)
    if decoder is None:
        raise UnsupportedVersionError(f"{cls.NAME} version {version} is not supported")
    try:
        return decoder(buf, pos)
    except Exception as fast_failure:  # noqa: BLE001 - any failure is malformed input; find the field
        from . import reference  # only on the error path: it loads the schema files
        reference.decode(cls.NAME, version, buf, pos)
        raise DecodeError(f"{cls.NAME} v{version}: {fast_failure}") from None


def _encode(cls, version, obj, out):
    encoder = cls.ENCODERS.get(version)
    if encoder is None:
        raise EncodeError(f"{cls.NAME} version {version} is not supported")
    if type(obj) is not cls:
        raise EncodeError(f"expected a {cls.NAME}, got {type(obj).__name__}")
    mark = len(out)
    regions = len(out.regions)
    try:
        encoder(obj, out)
    except EncodeError as exc:
        raise EncodeError(f"{cls.NAME} v{version}: {exc}") from None
    except Exception as fast_failure:  # noqa: BLE001 - find the field with the reference encoder
        del out[mark:]
        del out.regions[regions:]
        from . import reference
        reference.encode(cls.NAME, version, obj)
        raise EncodeError(f"{cls.NAME} v{version}: {fast_failure}") from None


def _expect_end(cls, version, buf, pos):
    if pos != len(buf):
        raise DecodeError(f"{cls.NAME} v{version}: {len(buf) - pos} unexpected bytes after the message")


def _partial_header(buf, api_key, api_version):
    correlation_id = _i32.unpack_from(buf, 4)[0] if len(buf) >= 8 else None
    return RequestHeader(request_api_key=api_key, request_api_version=api_version,
                         correlation_id=correlation_id if correlation_id is not None else 0)

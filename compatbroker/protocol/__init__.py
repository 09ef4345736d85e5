"""Kafka's wire protocol: request and response codecs generated from `schemas/`, and the record formats.

Pure: bytes in, objects out, and back; no I/O and no broker state.
"""
from .api import (api_name, decode_message, decode_request, decode_request_header, decode_response, encode_message,
                  encode_request, encode_response, encode_response_chunks, is_flexible, request_header_version,
                  response_header_version)
from .exceptions import DecodeError, EncodeError, UnsupportedVersionError
from .messages import API_KEYS, MESSAGES
from .messages.request_header import RequestHeader
from .messages.response_header import ResponseHeader
from .wire import FileRegion

__all__ = [
    "API_KEYS", "MESSAGES", "DecodeError", "api_name", "EncodeError", "FileRegion", "RequestHeader", "ResponseHeader",
    "UnsupportedVersionError", "decode_message", "decode_request", "decode_request_header", "decode_response",
    "encode_message", "encode_request", "encode_response", "encode_response_chunks", "is_flexible",
    "request_header_version", "response_header_version",
]

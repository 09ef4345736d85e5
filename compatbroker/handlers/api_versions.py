"""ApiVersions (key 18), versions 0-4: which APIs and versions this broker serves.

The answer lists every module of the handler registry with its declared [MIN_VERSION, MAX_VERSION], nothing more:
clients pick the highest version both sides know, so advertising a version we do not implement end to end breaks
them. The response always goes out with response header v0 (the protocol layer does that for key 18), because a
client reads it before it knows anything about the broker.

Behaviour as in Kafka:
- v3+ requests whose client_software_name or client_software_version is not alphanumeric with inner dots and
  dashes get INVALID_REQUEST (42) with no API list.
- A request of a version newer than MAX_VERSION never reaches this module: the server answers it with
  `unsupported_version_response`, a v0 body holding UNSUPPORTED_VERSION (35) and the one entry for ApiVersions, so
  that the client retries with a version we know (see compatbroker/server/connection.py).

Deviations: no feature flags are advertised (supported_features and finalized_features stay empty, epoch -1),
since a single broker without a controller has no metadata.version to negotiate.
"""
from __future__ import annotations

import re

from ..protocol.error_codes import ErrorCode
from ..protocol.messages import ApiVersionsResponse

API_KEY = 18
MIN_VERSION = 0
MAX_VERSION = 4

# Kafka's rule for the software name and version a v3+ client reports about itself (KIP-511).
_SOFTWARE_NAME_OR_VERSION = re.compile(r"[a-zA-Z0-9](?:[a-zA-Z0-9.\-]*[a-zA-Z0-9])?")


async def handle(ctx, request) -> ApiVersionsResponse:
    if ctx.api_version >= 3 and not (_SOFTWARE_NAME_OR_VERSION.fullmatch(request.client_software_name)
                                     and _SOFTWARE_NAME_OR_VERSION.fullmatch(request.client_software_version)):
        return ApiVersionsResponse(error_code=ErrorCode.INVALID_REQUEST)
    return ApiVersionsResponse(api_keys=advertised_versions(_registry(ctx)))


def advertised_versions(registry) -> list:
    return [ApiVersionsResponse.ApiVersion(api_key=key, min_version=module.MIN_VERSION,
                                           max_version=module.MAX_VERSION)
            for key, module in sorted(registry.items())]


def unsupported_version_response(min_version: int = MIN_VERSION, max_version: int = MAX_VERSION):
    """Kafka's answer to an ApiVersions request newer than ours; the caller encodes it as version 0."""
    entry = ApiVersionsResponse.ApiVersion(api_key=API_KEY, min_version=min_version, max_version=max_version)
    return ApiVersionsResponse(error_code=ErrorCode.UNSUPPORTED_VERSION, api_keys=[entry])


def _registry(ctx):
    if ctx.handlers is not None:
        return ctx.handlers
    from . import default_registry
    return default_registry()

"""ApiVersions (key 18), versions 0-4: which APIs and versions this broker serves.

The answer lists every module of the handler registry with its declared [MIN_VERSION, MAX_VERSION], nothing more:
clients pick the highest version both sides know, so advertising a version we do not implement end to end breaks
them. The response always goes out with response header v0 (the protocol layer does that for key 18), because a
client reads it before it knows anything about the broker.

Behaviour as in Kafka:
- v3+ requests whose client_software_name or client_software_version is not alphanumeric with inner dots and
  dashes get INVALID_REQUEST (42) with no API list.
- A valid v3+ request's client_software_name and client_software_version are kept on the connection's session:
  client metrics subscriptions (KIP-714) match them.
- GetTelemetrySubscriptions (71) and PushTelemetry (72) are listed: Kafka lists them only when a client telemetry
  receiver is configured, and compatbroker always has one (compatbroker.telemetry).
- A request of a version newer than MAX_VERSION never reaches this module: the server answers it with
  `unsupported_version_response`, a v0 body holding UNSUPPORTED_VERSION (35) and the one entry for ApiVersions, so
  that the client retries with a version we know (see compatbroker/server/connection.py).

Feature flags (KIP-584, v3+), as a Kafka 4.2 cluster formatted fresh reports them:
- `transaction.version` (KIP-890): supported levels 0-2, finalized level `broker.finalized_transaction_version` (2,
  Kafka 4.x's level for a new cluster; lower under `--emulate` for releases that do not finalize 2, with the
  release's supported range). The Java client (4.x) reads it to choose transactions v2 (Produce v12+, EndTxn v5,
  TxnOffsetCommit v5) and caps those APIs itself below it; Kafka's broker advertises the same API ranges whatever
  the level, and so does this one.
- `group.version` (KIP-848 consumer groups) and `share.version` (KIP-932 share groups): supported 0-1, finalized 1,
  since this broker serves ConsumerGroupHeartbeat and the share APIs. A release emulated without them (its
  supported features do not list them) reports neither.
A finalized level 0 is left out of the list, as Kafka leaves it out; so is a supported range whose highest level is
0, and below v4 one starting at 0 (KAFKA-17492: older clients cannot parse it).
`finalized_features_epoch` is 1 while a feature is finalized (a client keeps the features of the highest epoch it
has seen, starting from -1), else -1.

Deviations: Kafka also reports `metadata.version`, `kraft.version`, `eligible.leader.replicas.version` and
`streams.version`. This broker runs no KRaft metadata log and no streams groups, so it reports none of them rather
than levels that would promise what it does not do; clients decide nothing from them (the admin client's
`describeFeatures` shows what is reported).
"""
from __future__ import annotations

import re

from ..protocol.error_codes import ErrorCode
from ..protocol.messages import ApiVersionsResponse

API_KEY = 18
MIN_VERSION = 0
MAX_VERSION = 4

TRANSACTION_VERSION = "transaction.version"
GROUP_VERSION = "group.version"
SHARE_VERSION = "share.version"
# feature -> (min, max) level this broker can run
SUPPORTED_FEATURES = {TRANSACTION_VERSION: (0, 2), GROUP_VERSION: (0, 1), SHARE_VERSION: (0, 1)}
GROUP_FEATURE_LEVELS = {GROUP_VERSION: 1, SHARE_VERSION: 1}  # finalized where the registry supports them
FINALIZED_FEATURES_EPOCH = 1  # the levels never change while the broker runs
FIRST_VERSION_WITH_FEATURE_LEVEL_0 = 4  # KAFKA-17492

# Kafka's rule for the software name and version a v3+ client reports about itself (KIP-511).
_SOFTWARE_NAME_OR_VERSION = re.compile(r"[a-zA-Z0-9](?:[a-zA-Z0-9.\-]*[a-zA-Z0-9])?")


async def handle(ctx, request) -> ApiVersionsResponse:
    if ctx.api_version >= 3 and not (_SOFTWARE_NAME_OR_VERSION.fullmatch(request.client_software_name)
                                     and _SOFTWARE_NAME_OR_VERSION.fullmatch(request.client_software_version)):
        return ApiVersionsResponse(error_code=ErrorCode.INVALID_REQUEST)
    if ctx.api_version >= 3:  # the connection's client software, which client metrics subscriptions match
        ctx.session.client_software_name = request.client_software_name
        ctx.session.client_software_version = request.client_software_version
    registry = _registry(ctx)
    supported = _supported_levels(registry)
    finalized = _finalized_features(ctx.broker, supported)
    return ApiVersionsResponse(api_keys=advertised_versions(registry),
                               supported_features=_supported_features(supported, ctx.api_version),
                               finalized_features=finalized,
                               finalized_features_epoch=FINALIZED_FEATURES_EPOCH if finalized else -1)


def advertised_versions(registry) -> list:
    return [ApiVersionsResponse.ApiVersion(api_key=key, min_version=module.MIN_VERSION,
                                           max_version=module.MAX_VERSION)
            for key, module in sorted(registry.items())]


def _supported_levels(registry) -> dict[str, tuple[int, int]]:
    # A registry emulating a Kafka release (the toolkit's) carries that release's levels on its handlers.
    supported = getattr(registry.get(API_KEY), "supported_features", None)
    return SUPPORTED_FEATURES if supported is None else supported


def _supported_features(supported: dict[str, tuple[int, int]], version: int) -> list:
    return [ApiVersionsResponse.SupportedFeatureKey(name=name, min_version=low, max_version=high)
            for name, (low, high) in sorted(supported.items())
            if high > 0 and (low > 0 or version >= FIRST_VERSION_WITH_FEATURE_LEVEL_0)]


def _finalized_features(broker, supported: dict[str, tuple[int, int]]) -> list:
    levels = {TRANSACTION_VERSION: broker.finalized_transaction_version}
    levels.update({name: level for name, level in GROUP_FEATURE_LEVELS.items()
                   if name in supported and supported[name][1] >= level})
    return [ApiVersionsResponse.FinalizedFeatureKey(name=name, max_version_level=level, min_version_level=level)
            for name, level in sorted(levels.items()) if level > 0]


def unsupported_version_response(min_version: int = MIN_VERSION, max_version: int = MAX_VERSION):
    """Kafka's answer to an ApiVersions request newer than ours; the caller encodes it as version 0."""
    entry = ApiVersionsResponse.ApiVersion(api_key=API_KEY, min_version=min_version, max_version=max_version)
    return ApiVersionsResponse(error_code=ErrorCode.UNSUPPORTED_VERSION, api_keys=[entry])


def _registry(ctx):
    if ctx.handlers is not None:
        return ctx.handlers
    from . import default_registry
    return default_registry()

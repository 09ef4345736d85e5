"""GetTelemetrySubscriptions (API key 71), version 0: which metrics a client should push, and how (KIP-714).

The client's instance id (a new one for the zero uuid), the subscription id, the metric name prefixes of the
subscriptions matching it (client metrics subscriptions, the CLIENT_METRICS config resource), its push interval,
the compression types accepted (zstd, lz4, gzip, snappy), `telemetry.max.bytes` and delta temporality: Kafka
4.x's ClientMetricsManager, in `compatbroker.telemetry.client_telemetry`. Asked again before the push interval has
passed: THROTTLING_QUOTA_EXCEEDED with nothing else set. The client is matched on its client id, the software name
and version it gave in ApiVersions, and its address and port. No ACL is checked, as in Kafka. An unexpected
failure answers INVALID_REQUEST (one ERROR line), as Kafka's KafkaApis does.
"""
from __future__ import annotations

import logging

from ..protocol.error_codes import ErrorCode
from ..protocol.messages import GetTelemetrySubscriptionsResponse
from ..telemetry import TelemetryError
from .push_telemetry import client_info

API_KEY = 71
MIN_VERSION = 0
MAX_VERSION = 0

log = logging.getLogger(__name__)


async def handle(ctx, request) -> GetTelemetrySubscriptionsResponse:
    try:
        answer = ctx.broker.client_telemetry.get_subscriptions(request.client_instance_id, client_info(ctx),
                                                               client_gone=ctx.client_gone)
    except TelemetryError as exc:
        return GetTelemetrySubscriptionsResponse(error_code=exc.error_code)
    except Exception:  # noqa: BLE001 - Kafka answers INVALID_REQUEST rather than closing
        log.exception("GetTelemetrySubscriptions from %s (client %r) failed", ctx.peer, ctx.client_id)
        return GetTelemetrySubscriptionsResponse(error_code=ErrorCode.INVALID_REQUEST)
    return GetTelemetrySubscriptionsResponse(
        error_code=ErrorCode.NONE, client_instance_id=answer.client_instance_id,
        subscription_id=answer.subscription_id,
        accepted_compression_types=[int(kind) for kind in answer.accepted_compression_types],
        push_interval_ms=answer.push_interval_ms, telemetry_max_bytes=answer.telemetry_max_bytes,
        delta_temporality=answer.delta_temporality, requested_metrics=list(answer.requested_metrics))
